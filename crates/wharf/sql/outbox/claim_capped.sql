-- claim.sql with per-tenant caps on some kinds (ClaimBudget::PerTenant, SPEC §3.8): the same
-- lane heads and reclaims, except that the heads of a capped kind are at most its cap per
-- tenant, and a tenant capped at 0 is never looked at. Everything claim.sql says holds here,
-- the demotion of blocked rows (busy lanes included) after a short claim too.
--
-- Used only when some kind answered PerTenant, because the caps cost laziness: claim.sql probes
-- candidates in order and stops at $1 heads, while here every candidate ($5 at most) gets its
-- two lane probes before the caps can be counted (a window over (kind, tenant) needs all its
-- rows). That is at most 2 × $5 index probes, so the cost stays bounded and flat in the backlog
-- like claim.sql's, only higher. Measured on this 2-core machine (PostgreSQL 15, warm cache,
-- custom plans, 1 M due rows in 100 k lanes, 1000 tenants, $1 = 100, $5 = 1000, the 100-row
-- update and its triggers included): claim.sql 8–13 ms; this statement 22–27 ms, with 600
-- tenants listed (500 at 0, so half the scanned heads are skipped) or with one cap for all.
--
-- A tenant at 0 is filtered in the candidate scan itself, so its heads cannot fill the $5
-- window and starve other tenants; the filter is a per-row expression (see `caps`), so the
-- ordered index scan still stops at $5 rows. (A join there would make the planner sort the
-- whole due set.) The walk past a skipped tenant's rows costs one index tuple each; head_hint
-- keeps those to about one per lane of that tenant.
--
-- Reclaims of expired leases are not capped: lease recovery is exactly as in claim.sql, and they
-- come first here too (never limited by due work). The claim is the fence of the kinds in $9,
-- and `write_started` is the mark as it was before this claim, as in claim.sql.
--
-- $1..$5 as in claim.sql.
-- $6 text[], $7 text[], $8 integer[]: caps as (kind, tenant, rows). A NULL tenant is the cap of
--    every unlisted tenant of that kind; each capped kind has exactly one such entry, and
--    (kind, tenant) pairs are unique. Kinds without entries are not capped. Tenant ids are
--    never empty (the scope check), so the tenant '' is the kind's rows without a tenant
--    (unlisted, they count as one more tenant under the NULL entry's cap).
-- $9 text[]: the kinds whose claim records write_started_at ($6 of claim.sql).
WITH clock AS MATERIALIZED (
    SELECT coalesce($3::timestamptz, now()) AS now
),
-- The caps as one jsonb object, built once: "kind" → the cap of the kind's unlisted tenants,
-- "kind/tenant" → that tenant's cap ("kind/" → the rows without a tenant). Kind names have no
-- '/', so keys cannot collide. A row's cap is then two key lookups (a binary search each) in
-- the scan's filter, with no join: a join against the unnested arrays gets a nested loop
-- (the planner cannot know their length), 600 k comparisons for 600 tenants × 1000 heads.
caps AS MATERIALIZED (
    SELECT coalesce(jsonb_object_agg(k.kind || coalesce('/' || k.tenant_id, ''), k.rows_max),
                    '{}'::jsonb) AS m
      FROM unnest($6::text[], $7::text[], $8::integer[]) AS k(kind, tenant_id, rows_max)
),
candidates AS (
    SELECT c.id, c.lane_key, c.run_at, c.kind, c.tenant_id, c.cap
      FROM (SELECT a.id, a.lane_key, a.run_at, a.kind, a.tenant_id,
                   coalesce(((SELECT m FROM caps) ->> (a.kind || '/' || coalesce(a.tenant_id, '')))::integer,
                            ((SELECT m FROM caps) ->> a.kind)::integer) AS cap
              FROM wharf.action_live a, clock
             WHERE a.state = 'ADMITTED' AND a.head_hint AND a.run_at <= clock.now
               AND a.kind = ANY($4::text[])
               -- Past expiry only once a write started (see claim.sql).
               AND (a.expires_at IS NULL OR a.expires_at > clock.now
                    OR a.write_started_at IS NOT NULL)
               AND NOT (a.at_most_once AND a.write_started_at IS NOT NULL)) c
     -- A tenant at 0 is not looked at (NULL: the kind is not capped).
     WHERE c.cap IS DISTINCT FROM 0
     ORDER BY c.run_at, c.id
     LIMIT $5
),
heads AS (
    SELECT c.id, c.lane_key, c.run_at, c.kind, c.tenant_id, c.cap
      FROM candidates c
     WHERE (SELECT 1 FROM wharf.action_live e
             WHERE e.lane_key = c.lane_key AND e.state = 'EXECUTING' LIMIT 1) IS NULL
       -- The lane named by a row comparison, as in claim.sql: with `p.lane_key = c.lane_key`
       -- a generic plan may walk the primary key below the head instead of the lane index.
       AND (SELECT 1 FROM wharf.action_live p
             WHERE (p.lane_key, p.id) < (c.lane_key, c.id) AND p.lane_key >= c.lane_key
               AND p.state IN ('PROPOSED', 'ADMITTED')
             ORDER BY p.lane_key DESC, p.id DESC LIMIT 1) IS NULL
),
-- Each tenant's oldest heads up to its cap, then the oldest $1 of those.
capped AS (
    SELECT h.id, h.lane_key, h.run_at, false AS reclaim
      FROM (SELECT h.id, h.lane_key, h.run_at, h.cap,
                   row_number() OVER (PARTITION BY h.kind, h.tenant_id
                                      ORDER BY h.run_at, h.id) AS rank
              FROM heads h) h
     WHERE h.rank <= coalesce(h.cap, h.rank)
     ORDER BY h.run_at, h.id
     LIMIT $1
),
reclaims AS (
    SELECT r.id, r.lane_key, r.lease_expires_at AS run_at, true AS reclaim
      FROM wharf.action_live r, clock
     -- As in claim.sql: lease order on ix_action_lease, never a walk of every running action.
     WHERE r.lease_expires_at IS NOT NULL AND r.lease_expires_at <= clock.now
       AND (r.state || '') = 'EXECUTING'
       AND r.kind = ANY($4::text[])
       AND NOT (r.at_most_once AND r.write_started_at IS NOT NULL)
       AND r.attempt < r.max_attempts
     ORDER BY r.lease_expires_at
     LIMIT $1
),
picked AS (
    SELECT DISTINCT ON (u.lane_key) u.id, u.run_at, u.reclaim
      FROM (SELECT * FROM reclaims UNION ALL SELECT * FROM capped) u
     ORDER BY u.lane_key, u.reclaim DESC, u.run_at, u.id
),
locked AS (
    SELECT a.id, a.write_started_at IS NOT NULL AS was_started
      FROM wharf.action_live a, clock
     WHERE a.id IN (SELECT id FROM (SELECT id FROM picked
                                     ORDER BY reclaim DESC, run_at, id LIMIT $1) p)
       AND ((a.state = 'ADMITTED' AND a.run_at <= clock.now)
            OR (a.state = 'EXECUTING' AND a.lease_expires_at <= clock.now
                AND NOT (a.at_most_once AND a.write_started_at IS NOT NULL)
                AND a.attempt < a.max_attempts))
       FOR UPDATE OF a SKIP LOCKED
)
UPDATE wharf.action_live a
   SET state = 'EXECUTING',
       epoch = a.epoch + 1,
       attempt = a.attempt + 1,
       lease_expires_at = clock.now + $2::bigint * interval '1 millisecond',
       write_started_at = CASE WHEN a.kind = ANY($9::text[]) AND NOT a.at_most_once
                               THEN coalesce(a.write_started_at, clock.now)
                               ELSE a.write_started_at END
  FROM locked, clock
 WHERE a.id = locked.id
RETURNING a.id, a.kind, a.tenant_id, a.project_id, a.lane_key, a.idempotency_key, a.payload,
          a.subject_account_id, a.attempt, a.max_attempts, a.epoch, a.created_at,
          locked.was_started AS write_started,
          (a.kind = ANY($9::text[]) AND NOT a.at_most_once) AS claim_fenced
