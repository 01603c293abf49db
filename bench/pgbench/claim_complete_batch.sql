-- The claim-as-fence ceiling (bench/README.md): claim_fence_complete_batch.sql without the fence
-- statement, as wharf's executor runs a kind that is not at-most-once: the claim records
-- write_started_at itself (its commit is the fence), and the attempts' calls start at once, then
-- one completion statement. One run of this script = :batch actions drained, so jobs/s = tps ×
-- batch. Same table (setup.sql); same rule: a step that does not touch exactly :batch rows
-- returns no row into \gset and aborts the client.

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
           lease_expires_at = now() + interval '5 minutes',
           write_started_at = coalesce(a.write_started_at, now())
      FROM picked
     WHERE a.id = picked.id
    RETURNING a.id, a.epoch
)
SELECT array_agg(id) AS claimed_ids, array_agg(epoch) AS claimed_epochs
  FROM claimed
HAVING count(*) = :batch
\gset

-- 2. Complete them, each under its own epoch, in one statement.
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
