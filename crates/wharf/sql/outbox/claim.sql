-- Claims up to $1 due lane heads and expired leases in one statement (SPEC §2.3).
--
-- A lane head is a due ADMITTED action with no EXECUTING action in its lane and no earlier
-- unstarted (PROPOSED or ADMITTED, due or not) action in its lane. Both conditions are checked
-- exactly here, with one probe each into ux_action_lane_executing and ix_action_lane_pending;
-- head_hint only narrows which rows are looked at (see 0002_outbox.sql and
-- 0011_outbox_busy_lane_hints.sql). Rows the window finds blocked, behind an earlier unstarted
-- action or in a lane with an EXECUTING one, are demoted after a short claim (demote.sql, over
-- this same window), so blocked rows cannot keep the window full and starve idle lanes; they
-- get the hint back when what blocks them leaves (the promotion triggers). An EXECUTING action
-- whose lease expired is reclaimed without waiting for anything, unless it is at-most-once and
-- its write started (the lease sweep ends those UNCERTAIN; the guard trigger would refuse), or
-- its last allowed attempt held the lease (attempt >= max_attempts: the lease sweep ends it, so a
-- crashing adapter is not reclaimed forever).
-- The epoch and the attempt rise by one; the lease runs from the database clock.
--
-- $1 integer: claim at most this many (≤ 100).
-- $2 bigint: lease length in milliseconds.
-- $3 timestamptz: "now" for tests; NULL means the database clock.
-- $4 text[]: the kinds this executor may claim now.
-- $5 integer: look at most at this many head candidates (bounds the cost of one claim; what
--    the window holds beyond true heads is demoted, so it does not hide later heads for long).
WITH clock AS MATERIALIZED (
    SELECT coalesce($3::timestamptz, now()) AS now
),
candidates AS (
    SELECT c.id, c.lane_key, c.run_at
      FROM wharf.action c, clock
     WHERE c.state = 'ADMITTED' AND c.head_hint AND c.run_at <= clock.now
       AND c.kind = ANY($4::text[])
       -- Past expiry only once a write started: the sweep does not expire those.
       AND (c.expires_at IS NULL OR c.expires_at > clock.now
            OR c.write_started_at IS NOT NULL)
       AND NOT (c.at_most_once AND c.write_started_at IS NOT NULL)
     ORDER BY c.run_at, c.id
     LIMIT $5
),
-- The two lane checks are scalar subqueries with LIMIT 1 on purpose: PostgreSQL turns NOT EXISTS
-- into an anti join, and with many unstarted rows the planner hashes the whole pending index
-- (a scan of every unstarted row per claim). As subqueries they stay one index probe per
-- candidate, evaluated lazily in candidate order until $1 heads are found.
heads AS (
    SELECT c.id, c.lane_key, c.run_at
      FROM candidates c
     WHERE (SELECT 1 FROM wharf.action e
             WHERE e.lane_key = c.lane_key AND e.state = 'EXECUTING' LIMIT 1) IS NULL
       AND (SELECT 1 FROM wharf.action p
             WHERE p.lane_key = c.lane_key AND p.state IN ('PROPOSED', 'ADMITTED')
               AND p.id < c.id LIMIT 1) IS NULL
     ORDER BY c.run_at, c.id
     LIMIT $1
),
reclaims AS (
    SELECT r.id, r.lane_key, r.lease_expires_at AS run_at
      FROM wharf.action r, clock
     WHERE r.state = 'EXECUTING' AND r.lease_expires_at <= clock.now
       AND r.kind = ANY($4::text[])
       AND NOT (r.at_most_once AND r.write_started_at IS NOT NULL)
       AND r.attempt < r.max_attempts
     ORDER BY r.lease_expires_at
     LIMIT $1
),
picked AS (
    SELECT DISTINCT ON (u.lane_key) u.id, u.run_at
      FROM (SELECT * FROM reclaims UNION ALL SELECT * FROM heads) u
     ORDER BY u.lane_key, u.run_at, u.id
),
locked AS (
    SELECT a.id
      FROM wharf.action a, clock
     WHERE a.id IN (SELECT id FROM (SELECT id, run_at FROM picked ORDER BY run_at, id LIMIT $1) p)
       AND ((a.state = 'ADMITTED' AND a.run_at <= clock.now)
            OR (a.state = 'EXECUTING' AND a.lease_expires_at <= clock.now
                AND NOT (a.at_most_once AND a.write_started_at IS NOT NULL)
                AND a.attempt < a.max_attempts))
       FOR UPDATE OF a SKIP LOCKED
)
UPDATE wharf.action a
   SET state = 'EXECUTING',
       epoch = a.epoch + 1,
       attempt = a.attempt + 1,
       lease_expires_at = clock.now + $2::bigint * interval '1 millisecond'
  FROM locked, clock
 WHERE a.id = locked.id
RETURNING a.id, a.kind, a.tenant_id, a.project_id, a.lane_key, a.idempotency_key, a.payload,
          a.subject_account_id, a.attempt, a.max_attempts, a.epoch,
          a.write_started_at IS NOT NULL AS write_started, a.at_most_once
