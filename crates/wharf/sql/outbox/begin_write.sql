-- The fence (SPEC §2.3): records that the provider call is about to start, in its own short
-- transaction, only when the claim still holds the action with at least the fence margin of
-- lease left. A row missing from the result was refused: another claim took it, erasure deleted
-- it, or the lease is too short. The first start time is kept, so a second call changes nothing.
--
-- Many attempts' fences may share one statement (the executor batches fences that arrive
-- together): each row is still decided on its own (id, epoch) and lease, and the caller waits
-- for this statement's commit before its provider call, so batching changes how many commits
-- the database makes, never what any one attempt may assume.
-- $1 bigint[] action ids. $2 bigint[] the claims' epochs (same order).
-- $3 bigint: fence margin in milliseconds.
-- $4 timestamptz: "now" for tests; NULL means the database clock.
UPDATE wharf.action_live a
   SET write_started_at = coalesce(a.write_started_at, coalesce($4::timestamptz, now()))
  FROM unnest($1::bigint[], $2::bigint[]) AS f(id, epoch)
 WHERE a.id = ANY($1::bigint[]) AND a.id = f.id AND a.epoch = f.epoch
   -- One CASE for the state and the lease: the plan is complete.sql's, and no test here implies
   -- a partial index's predicate (the lease test alone made the planner walk ix_action_lease).
   AND CASE WHEN a.state = 'EXECUTING'
                 AND a.lease_expires_at - coalesce($4::timestamptz, now())
                     >= $3::bigint * interval '1 millisecond'
            THEN true ELSE false END
RETURNING a.id
