-- Takes the claim hint off due ADMITTED actions that cannot be claimed because of their lane, so
-- later claims stop looking at them: those behind an earlier unstarted action of their lane, and
-- those whose lane has an EXECUTING action. The second kind is what keeps idle lanes from
-- starving: a claim looks at only $5 candidates (claim.sql), and without this, more than $5 due
-- actions of busy lanes (a slow action running, the next one due) would fill that window on
-- every claim, and due heads of idle lanes further back in run_at order would wait until the
-- slow actions finish.
--
-- The rule that makes a demotion safe: at the moment this statement commits, whatever blocks the
-- demoted row still blocks it, so the lane's next promotion is still to come (the promotion
-- triggers, 0011_outbox_busy_lane_hints.sql). Either the row is not the lane's first unstarted
-- action, and an earlier one, still unstarted, leaves some day: refused, expired or erased (its
-- trigger promotes the lane's first unstarted action then), or claimed (the lane is then busy,
-- as below). Or the lane has an EXECUTING action, and when it leaves EXECUTING (back to
-- ADMITTED, to an ended state, or deleted) its trigger promotes the lane's first unstarted
-- action. So a demotion never strands a row: the invariant kept is that a lane's first unstarted
-- action carries the hint or the lane has an EXECUTING action.
--
-- Marks (0013_outbox_lane_wake_marks.sql): the blocker of every demoted row gets `wakes_lane`
-- in this same statement, so that its departure promotes the lane (the triggers fire only for
-- marked rows and rows leaving PROPOSED). A PROPOSED blocker cannot be marked (the guard refuses
-- PROPOSED -> PROPOSED) and needs no mark: rows leaving PROPOSED always promote.
--
-- "Still blocks it at commit" holds because the blocker is locked here (share-locked when
-- PROPOSED; locked for the update that marks it otherwise), re-checked on its newest version: an unstarted blocker must still be unstarted, an EXECUTING blocker must still
-- be EXECUTING. Every departure of a blocker (claim, completion, release, sweep, refusal,
-- expiry, erasure) is an UPDATE or DELETE of that row, which conflicts with the share lock. The
-- race that matters is this statement reading "the lane has an EXECUTING action" while that
-- action's completion (B) commits; the orders:
-- - B committed before this statement's snapshot: the action is not EXECUTING here, the row is
--   not its target (it is a true head, or behind something else).
-- - B commits after the snapshot, before the share lock: READ COMMITTED locks the newest
--   version, the state re-check fails (or the row is gone), and nothing behind it is demoted.
--   B's trigger ran already and left the hint on; it stays on.
-- - B holds the row (updated, not committed) when the lock is tried: SKIP LOCKED passes over
--   it, nothing behind it is demoted. B's trigger runs before B commits and sees the hint on.
-- - B comes after the lock: its UPDATE (or DELETE) waits for this statement to commit, a few
--   milliseconds (this statement never waits on anything; a claim skips the row instead of
--   waiting, and takes it later), and its trigger then runs with a fresh snapshot, sees the
--   demotion and puts the hint back on the lane's first unstarted row.
--   (A caller's REPEATABLE READ transaction has no fresh snapshot; the trigger locks that row
--   instead, so it fails with a serialization error rather than stranding it: 0011.)
-- The same four orders hold for an unstarted blocker and its refusal, expiry or erasure, and
-- for its claim, which needs no trigger (it leaves the lane busy). An EXECUTING blocker is
-- re-checked as EXECUTING, not as "live": one that went back to ADMITTED may have a higher id
-- than the row it blocked (ids are assigned before enqueues commit), and then it blocks nothing;
-- one that went back to EXECUTING (completed, then claimed again) blocks again, rightly.
--
-- Never waits: a locked blocker or a locked target is skipped, so demotions cannot deadlock with
-- each other, with claims, with completions or with the promotion triggers (a statement that
-- waits for this one waits for a statement that waits for nothing). A row may be both the
-- blocker of a later row of its lane (share-locked) and a target itself (its lane has an
-- EXECUTING action): this statement's own share lock does not conflict with its update lock, and
-- another statement's does, so the row is then skipped.
--
-- Which rows: the same window a claim scans (claim.sql's candidates without the kind filter,
-- which this statement is not given), so what fills a short claim's window is what this
-- statement looks at, but for the case left as it is below.
-- An unstarted blocker is preferred, as before EXECUTING ones counted, so only a busy lane's
-- first unstarted row costs a share lock on its EXECUTING action (which makes a completion of
-- that action wait for this statement). Cost: at most $1 candidates, at most three index probes
-- each (the window, the earlier unstarted row, the EXECUTING row), and as many row locks.
-- Left as it is: more than $1 true heads at the front that this executor may not claim now
-- (kinds at their concurrency or budget, tenants capped at 0, which claims skip but this
-- statement is not told about) cannot be demoted, and hide the busy rows of other kinds behind
-- them from this statement until those heads are claimed. Passing the claim's kinds here would
-- close that; it needs the store function and the executor's call to pass them.
--
-- $1 integer: look at most at this many candidates.
-- $2 timestamptz: "now" for tests; NULL means the database clock.
WITH clock AS MATERIALIZED (
    SELECT coalesce($2::timestamptz, now()) AS now
),
-- What a claim scans (see claim.sql's candidates), less the kind filter.
scanned AS MATERIALIZED (
    SELECT a.id, a.lane_key
      FROM wharf.action_live a, clock
     WHERE a.state = 'ADMITTED' AND a.head_hint AND a.run_at <= clock.now
       AND (a.expires_at IS NULL OR a.expires_at > clock.now
            OR a.write_started_at IS NOT NULL)
       AND NOT (a.at_most_once AND a.write_started_at IS NOT NULL)
     ORDER BY a.run_at, a.id
     LIMIT $1
),
-- The lane's first unstarted action before the row, if any. The lane is bounded by `>=` and
-- `<=`, not named by `=`, and the row by a row comparison: with the lane fixed by equality the
-- planner reduces `ORDER BY lane_key, id` to `id`, which the primary key gives too, and a
-- generic plan (this runs on the statement pool, where PostgreSQL may switch to one after five
-- runs) made on an emptied table with statistics of long lanes walked the primary key below
-- each row (claim.sql, 2026-12-05). Written this way only ix_action_lane_pending gives the
-- order: read forward from the lane's start, the first entry is the answer.
pending AS MATERIALIZED (
    SELECT c.id, c.lane_key,
           (SELECT p.id FROM wharf.action_live p
             WHERE p.lane_key >= c.lane_key AND p.lane_key <= c.lane_key
               AND (p.lane_key, p.id) < (c.lane_key, c.id)
               AND p.state IN ('PROPOSED', 'ADMITTED')
             ORDER BY p.lane_key, p.id LIMIT 1) AS blocker
      FROM scanned c
),
-- Else the lane's EXECUTING action (coalesce probes it only for rows without the first kind).
-- Rows with neither (blocker NULL) are true heads; nothing below matches them. Materialized:
-- the locks and the targets below must see the same blocker, of the same kind, for each row.
blocked AS MATERIALIZED (
    SELECT d.id,
           coalesce(d.blocker,
                    (SELECT e.id FROM wharf.action_live e
                      WHERE e.lane_key = d.lane_key AND e.state = 'EXECUTING' LIMIT 1)) AS blocker,
           d.blocker IS NULL AS busy
      FROM pending d
),
-- Each blocker locked in the state it blocks in, re-checked on its newest version: a PROPOSED
-- one share-locked, an ADMITTED or EXECUTING one locked for the update that marks it.
held_proposed AS (
    SELECT p.id
      FROM wharf.action_live p
     WHERE p.id IN (SELECT blocker FROM blocked WHERE NOT busy)
       AND p.state = 'PROPOSED'
       FOR SHARE SKIP LOCKED
),
held_admitted AS (
    SELECT p.id, p.wakes_lane
      FROM wharf.action_live p
     WHERE p.id IN (SELECT blocker FROM blocked WHERE NOT busy)
       AND p.state = 'ADMITTED'
       FOR NO KEY UPDATE SKIP LOCKED
),
-- The ids as an array on purpose: with `IN (SELECT ...)` the planner, not knowing how few they
-- are, hashes them against every EXECUTING row (ix_action_lease matches the state test), a scan
-- of all running actions per demotion (measured: 10 ms with 20 k running); an array is one
-- primary-key probe each.
held_busy AS (
    SELECT e.id, e.wakes_lane
      FROM wharf.action_live e
     WHERE e.id = ANY (ARRAY(SELECT blocker FROM blocked WHERE busy))
       AND e.state = 'EXECUTING'
       FOR NO KEY UPDATE SKIP LOCKED
),
held AS (
    SELECT id, true AS marked FROM held_proposed
    UNION ALL SELECT id, wakes_lane FROM held_admitted
    UNION ALL SELECT id, wakes_lane FROM held_busy
),
targets AS (
    SELECT n.id, b.blocker
      FROM wharf.action_live n
      JOIN blocked b ON b.id = n.id
     WHERE n.state = 'ADMITTED' AND n.head_hint
       AND b.blocker IN (SELECT id FROM held)
       FOR UPDATE OF n SKIP LOCKED
),
-- One change per row: a row can be both a target (its lane is busy) and the blocker of a later
-- row, and one statement may update a row only once.
changes AS (
    SELECT u.id, bool_or(u.demote) AS demote, bool_or(u.mark) AS mark
      FROM (SELECT t.id, true AS demote, false AS mark FROM targets t
            UNION ALL
            SELECT t.blocker, false, true
              FROM targets t JOIN held h ON h.id = t.blocker
             WHERE NOT h.marked) u
     GROUP BY u.id
)
UPDATE wharf.action_live n
   SET head_hint = n.head_hint AND NOT c.demote,
       wakes_lane = n.wakes_lane OR c.mark
  FROM changes c
 WHERE n.id = c.id
RETURNING c.demote
