-- The batched fenced-path ceiling (bench/README.md): claim_fence_complete.sql with :batch
-- actions per step (pgbench -D batch=B; run.sh --batch B), as wharf's executor may do it: one
-- claim of up to 100 due rows (SPEC §2.3), one fence statement for the claimed rows whose calls
-- start now, one completion statement (crates/wharf/sql/outbox/complete.sql takes arrays).
-- One run of this script = :batch actions drained, so jobs/s = tps × batch. Same table
-- (setup.sql); same rule: a step that does not touch exactly :batch rows (the prefill ran out, an
-- epoch was lost) returns no row into \gset and aborts the client.

-- 1. Claim :batch due rows in one statement.
WITH picked AS (
    SELECT c.id
      FROM wharf_ceiling.action c
     WHERE c.state = 'ADMITTED' AND c.run_at <= now()
     ORDER BY c.run_at, c.id
     LIMIT :batch
       FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE wharf_ceiling.action a
       SET state = 'EXECUTING',
           epoch = a.epoch + 1,
           attempt = a.attempt + 1,
           lease_expires_at = now() + interval '5 minutes'
      FROM picked
     WHERE a.id = picked.id
    RETURNING a.id, a.epoch
)
SELECT array_agg(id) AS claimed_ids, array_agg(epoch) AS claimed_epochs
  FROM claimed
HAVING count(*) = :batch
\gset

-- 2. Fence them, each under its own epoch, in one statement.
WITH fenced AS (
    UPDATE wharf_ceiling.action a
       SET write_started_at = coalesce(a.write_started_at, now())
      FROM unnest(:claimed_ids::bigint[], :claimed_epochs::bigint[]) AS r(id, epoch)
     WHERE a.id = r.id AND a.epoch = r.epoch AND a.state = 'EXECUTING'
       AND a.lease_expires_at - now() >= interval '60 seconds'
    RETURNING a.id
)
SELECT count(*) AS fenced_count FROM fenced HAVING count(*) = :batch
\gset

-- 3. Complete them, each under its own epoch, in one statement.
WITH completed AS (
    UPDATE wharf_ceiling.action a
       SET state = 'DONE',
           payload = NULL,
           lease_expires_at = NULL,
           ended_at = now()
      FROM unnest(:claimed_ids::bigint[], :claimed_epochs::bigint[]) AS r(id, epoch)
     WHERE a.id = r.id AND a.epoch = r.epoch AND a.state = 'EXECUTING'
    RETURNING a.id
)
SELECT count(*) AS completed_count FROM completed HAVING count(*) = :batch
\gset
