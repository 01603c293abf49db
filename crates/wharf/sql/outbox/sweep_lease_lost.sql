-- Ends actions whose lease expired and that no claim may take again, at most $1 per statement:
-- - at-most-once actions whose write started: nobody can tell whether the provider holds the
--   effect, and claiming them again could send it twice;
-- - actions whose last allowed attempt lost its lease (attempt >= max_attempts): a reclaim would
--   run attempt max_attempts + 1, and an adapter that kills its process would be reclaimed
--   forever. The claims exclude both (claim.sql, claim_capped.sql).
-- EXECUTING -> UNCERTAIN / LEASE_LOST_AFTER_WRITE when a write started (an attempt may have
-- reached the provider: the effect may exist, so the end is UNCERTAIN, and "lease lost after
-- the write" says exactly why), else FAILED / ATTEMPTS_EXHAUSTED (no attempt got past its fence,
-- nothing was written, and every attempt was used: the seed's end for spent attempts).
-- $1 integer: batch bound. $2 timestamptz: "now" for tests; NULL means the database clock.
-- Returns id, kind, and stop_reason.
WITH clock AS MATERIALIZED (
    SELECT coalesce($2::timestamptz, now()) AS now
),
lost AS (
    SELECT a.id
      FROM wharf.action a, clock
     -- The state test written so that no index on EXECUTING rows can serve it: the walk must be
     -- ix_action_lease in lease order, not every running action (0014_outbox_lease_index.sql).
     WHERE a.lease_expires_at IS NOT NULL AND a.lease_expires_at <= clock.now
       AND (a.state || '') = 'EXECUTING'
       AND ((a.at_most_once AND a.write_started_at IS NOT NULL)
            OR a.attempt >= a.max_attempts)
     ORDER BY a.lease_expires_at
     LIMIT $1
       FOR UPDATE OF a SKIP LOCKED
)
UPDATE wharf.action a
   SET state = CASE WHEN a.write_started_at IS NOT NULL THEN 'UNCERTAIN' ELSE 'FAILED' END,
       stop_reason = CASE WHEN a.write_started_at IS NOT NULL THEN 'LEASE_LOST_AFTER_WRITE'
                          ELSE 'ATTEMPTS_EXHAUSTED' END,
       error_code = CASE WHEN a.write_started_at IS NOT NULL THEN 'lease_lost_after_write'
                         ELSE 'lease_lost' END,
       payload = NULL, ended_at = clock.now, lease_expires_at = NULL
  FROM lost, clock
 WHERE a.id = lost.id AND a.state = 'EXECUTING'
RETURNING a.id, a.kind, a.stop_reason
