-- Claims up to $1 expired leases and due lane heads in one statement (SPEC §2.3).
--
-- Reclaims come first and are never limited by due work: an EXECUTING action whose lease expired
-- is reclaimed without waiting for anything, unless it is at-most-once and its write started (the
-- lease sweep ends those UNCERTAIN; the guard trigger would refuse), or its last allowed attempt
-- held the lease (attempt >= max_attempts: the lease sweep ends it, so a crashing adapter is not
-- reclaimed forever). Heads fill what the reclaims left of $1. Reclaims used to compete with due
-- heads inside one limit ordered by time, where a lease that expired after the backlog's oldest
-- run_at lost every time: under a backlog, a dead holder's lane waited behind unrelated work
-- (seen 7 s late at the median, 17 s at worst, past a 10 s lease).
--
-- A lane head is a due ADMITTED action with no EXECUTING action in its lane and no earlier
-- unstarted (PROPOSED or ADMITTED, due or not) action in its lane. Both conditions are checked
-- exactly here, with one probe each into ux_action_lane_executing and ix_action_lane_pending;
-- head_hint only narrows which rows are looked at (see 0002_outbox.sql and
-- 0011_outbox_busy_lane_hints.sql). Rows the window finds blocked, behind an earlier unstarted
-- action or in a lane with an EXECUTING one, are demoted after a short claim (demote.sql, over
-- this same window), so blocked rows cannot keep the window full and starve idle lanes.
--
-- Locks are taken where the rows are found (FOR UPDATE SKIP LOCKED under each LIMIT), not after
-- the limit: two claims running at once (one replica pipelining, or two replicas) then skip each
-- other's rows and each still fills its $1, where locking only the final pick made the second
-- claim find the first one's rows, skip them, and come back short.
--
-- Reclaims and heads cannot share a lane (a head's lane has no EXECUTING action, a reclaim is
-- one), and heads cannot share one either (only a lane's first unstarted row is a head), so the
-- union needs no de-duplication; the unique index on EXECUTING lanes still decides a race
-- between replicas.
--
-- The claim as the fence ($6, SPEC §2.3 "refinement for speed"): for the kinds in $6, never
-- at-most-once ones, the claim records write_started_at itself, so this statement's commit is
-- the durable mark the fence would write, and the executor answers the fence without a round
-- trip while the lease (by its monotonic clock, taken before this statement was sent) still
-- has more than the fence margin left. The mark is cleared again by the completion when the
-- attempt proves it never reached its fence (complete.sql, release.sql).
-- `write_started` in the result is the mark as it was before this claim: whether an EARLIER
-- attempt may have written (the adapter reads back), not this claim's own mark.
--
-- The epoch and the attempt rise by one; the lease runs from the database clock. The clock is a
-- scalar subquery, not a joined CTE: a join makes the planner estimate every probe as a join.
--
-- $1 integer: claim at most this many (≤ 100).
-- $2 bigint: lease length in milliseconds.
-- $3 timestamptz: "now" for tests; NULL means the database clock.
-- $4 text[]: the kinds this executor may claim now.
-- $5 integer: look at most at this many head candidates (bounds the cost of one claim; what
--    the window holds beyond true heads is demoted, so it does not hide later heads for long).
-- $6 text[]: the kinds whose claim records write_started_at (the claim is their fence).
WITH reclaims AS (
    SELECT r.id, r.write_started_at IS NOT NULL AS was_started
      FROM wharf.action_live r
     -- Walked in lease order on ix_action_lease: the state test is written so that no index on
     -- EXECUTING rows can serve it (with statistics from a quiet moment the planner took the
     -- lane index instead and read every running action per claim; 0014_outbox_lease_index.sql).
     WHERE r.lease_expires_at IS NOT NULL
       AND r.lease_expires_at <= (SELECT coalesce($3::timestamptz, now()))
       AND (r.state || '') = 'EXECUTING'
       AND r.kind = ANY($4::text[])
       AND NOT (r.at_most_once AND r.write_started_at IS NOT NULL)
       AND r.attempt < r.max_attempts
     ORDER BY r.lease_expires_at
     LIMIT $1
       FOR UPDATE SKIP LOCKED
),
candidates AS MATERIALIZED (
    SELECT c.id
      FROM wharf.action_live c
     WHERE c.state = 'ADMITTED' AND c.head_hint
       AND c.run_at <= (SELECT coalesce($3::timestamptz, now()))
       AND c.kind = ANY($4::text[])
       -- Past expiry only once a write started: the sweep does not expire those.
       AND (c.expires_at IS NULL OR c.expires_at > (SELECT coalesce($3::timestamptz, now()))
            OR c.write_started_at IS NOT NULL)
       AND NOT (c.at_most_once AND c.write_started_at IS NOT NULL)
     ORDER BY c.run_at, c.id
     LIMIT $5
),
-- The two lane checks are scalar subqueries with LIMIT 1 on purpose: PostgreSQL turns NOT EXISTS
-- into an anti join, and with many unstarted rows the planner hashes the whole pending index
-- (a scan of every unstarted row per claim). As subqueries they stay one index probe per
-- candidate, evaluated lazily in window order until enough heads are locked.
-- The shape is fixed by the text, not left to estimates: statistics taken while the table was
-- empty (a drained queue, or a fresh install) made the planner think a table of thousands of rows
-- held a few dozen, and it joined the window to the table by a join filter with sequential lane
-- probes (seen: 7 s for one claim of 100). So the window is MATERIALIZED in run_at order; each
-- candidate is looked up by primary key in a LATERAL subquery (the state test written so that no
-- partial index can serve it instead), locked there, and probed; each probe's ORDER BY is its
-- index's order, so only that index answers it without a sort. The earlier-action probe names
-- its lane by a row comparison and a bound, not by equality: with `p.lane_key = h.lane_key` the
-- planner knows the lane is fixed, reduces `ORDER BY lane_key, id` to `id`, and the primary key
-- answers that too. A generic plan made on an emptied table with statistics left from long lanes
-- took it (seen 2026-12-05: `id < h.id` on the primary key with lane and state as filters, 6,748
-- rows a probe and growing, claims at 300 ms, start latency at 2,000/s 30 s). Written as
-- `(lane_key, id) < (h.lane_key, h.id) AND lane_key >= h.lane_key`, which is the same rows, only
-- ix_action_lane_pending gives the order, walked backwards from (h.lane_key, h.id): one entry
-- read, the nearest earlier row of the lane or the end of the lane. (Turning sequential scans and
-- hash/merge joins off for the executor's sessions was tried as well: with the same stale
-- estimates it made the completion statement walk the table per batch, 1.5 ms a row.)
heads AS (
    SELECT h.id, h.was_started
      FROM candidates c
     CROSS JOIN LATERAL (
            SELECT h.id, h.write_started_at IS NOT NULL AS was_started
              FROM wharf.action_live h
             WHERE h.id = c.id AND (h.state || '') = 'ADMITTED'
               AND (SELECT 1 FROM wharf.action_live e
                     WHERE e.lane_key = h.lane_key AND e.state = 'EXECUTING'
                     ORDER BY e.lane_key LIMIT 1) IS NULL
               AND (SELECT 1 FROM wharf.action_live p
                     WHERE (p.lane_key, p.id) < (h.lane_key, h.id) AND p.lane_key >= h.lane_key
                       AND p.state IN ('PROPOSED', 'ADMITTED')
                     ORDER BY p.lane_key DESC, p.id DESC LIMIT 1) IS NULL
               FOR UPDATE SKIP LOCKED
          ) h
     LIMIT greatest($1 - (SELECT count(*) FROM reclaims), 0)
),
picked AS (
    SELECT id, was_started FROM reclaims
    UNION ALL
    SELECT id, was_started FROM heads
)
UPDATE wharf.action_live a
   SET state = 'EXECUTING',
       epoch = a.epoch + 1,
       attempt = a.attempt + 1,
       lease_expires_at = (SELECT coalesce($3::timestamptz, now()))
                          + $2::bigint * interval '1 millisecond',
       write_started_at = CASE WHEN a.kind = ANY($6::text[]) AND NOT a.at_most_once
                               THEN coalesce(a.write_started_at,
                                             (SELECT coalesce($3::timestamptz, now())))
                               ELSE a.write_started_at END
-- The picked rows by primary key, as one array, not as a join: a join leaves the planner a
-- choice of order, and a generic plan made while the table was empty walked the whole primary
-- key on the outside of it (seen: 24,000 rows compared with each of 100, 0.5 s a claim).
 WHERE a.id = ANY (ARRAY(SELECT id FROM picked))
RETURNING a.id, a.kind, a.tenant_id, a.project_id, a.lane_key, a.idempotency_key, a.payload,
          a.subject_account_id, a.attempt, a.max_attempts, a.epoch, a.created_at,
          a.id = ANY (ARRAY(SELECT id FROM picked WHERE was_started)) AS write_started,
          (a.kind = ANY($6::text[]) AND NOT a.at_most_once) AS claim_fenced
