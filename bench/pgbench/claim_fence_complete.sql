-- The fenced-path ceiling (bench/README.md): one action claimed, fenced and completed, in three
-- transactions, as wharf's executor does for one no-op action (SPEC §2.3), with the minimum of
-- SQL. One run of this script = one action drained, so pgbench's tps is comparable to wharf's
-- and Graphile Worker's jobs_per_second. Table: wharf_ceiling.action (setup.sql).
--
-- Every statement returns a row into \gset, and \gset refuses zero rows: a claim that finds no
-- due row (the prefill ran out) or a fence/completion that lost its epoch aborts the client and
-- makes pgbench exit non-zero, so such a run can never pass for a fast one.

-- 1. Claim: one due row, skipping rows other clients hold; epoch and attempt up by one, lease
--    from the database clock.
UPDATE wharf_ceiling.action a
   SET state = 'EXECUTING',
       epoch = a.epoch + 1,
       attempt = a.attempt + 1,
       lease_expires_at = now() + interval '5 minutes'
 WHERE a.id = (SELECT c.id
                 FROM wharf_ceiling.action c
                WHERE c.state = 'ADMITTED' AND c.run_at <= now()
                ORDER BY c.run_at, c.id
                LIMIT 1
                  FOR UPDATE SKIP LOCKED)
RETURNING a.id AS action_id, a.epoch AS action_epoch
\gset

-- 2. Fence: the write starts, only under this claim's epoch and with the fence margin (60 s) of
--    lease left.
UPDATE wharf_ceiling.action
   SET write_started_at = coalesce(write_started_at, now())
 WHERE id = :action_id AND epoch = :action_epoch AND state = 'EXECUTING'
   AND lease_expires_at - now() >= interval '60 seconds'
RETURNING id AS fenced_id
\gset

-- 3. Complete: DONE under the same epoch; the payload goes, the end time is set.
UPDATE wharf_ceiling.action
   SET state = 'DONE',
       payload = NULL,
       lease_expires_at = NULL,
       ended_at = now()
 WHERE id = :action_id AND epoch = :action_epoch AND state = 'EXECUTING'
RETURNING id AS completed_id
\gset
