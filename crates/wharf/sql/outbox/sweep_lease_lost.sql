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
-- The action moves to wharf.action_ended (0060).
-- $1 integer: batch bound. $2 timestamptz: "now" for tests; NULL means the database clock.
-- Returns id, kind, and stop_reason.
WITH clock AS MATERIALIZED (
    SELECT coalesce($2::timestamptz, now()) AS now
),
lost AS (
    SELECT a.id
      FROM wharf.action_live a, clock
     -- The state test written so that no index on EXECUTING rows can serve it: the walk must be
     -- ix_action_lease in lease order, not every running action (0014_outbox_lease_index.sql).
     WHERE a.lease_expires_at IS NOT NULL AND a.lease_expires_at <= clock.now
       AND (a.state || '') = 'EXECUTING'
       AND ((a.at_most_once AND a.write_started_at IS NOT NULL)
            OR a.attempt >= a.max_attempts)
     ORDER BY a.lease_expires_at
     LIMIT $1
       FOR UPDATE OF a SKIP LOCKED
),
gone AS (
    DELETE FROM wharf.action_live a
     USING lost
     WHERE a.id = lost.id AND a.state = 'EXECUTING'
    RETURNING a.id, a.kind, a.tenant_id, a.project_id, a.lane_key, a.idempotency_key,
              a.content_digest, a.at_most_once, a.instance_level, a.epoch, a.attempt,
              a.max_attempts, a.subject_account_id, a.run_at, a.expires_at, a.write_started_at,
              a.readback_ref, a.error_code, a.created_at
)
INSERT INTO wharf.action_ended (id, kind, tenant_id, project_id, lane_key, idempotency_key,
                                content_digest, at_most_once, instance_level, state, stop_reason,
                                epoch, attempt, max_attempts, subject_account_id, run_at,
                                expires_at, write_started_at, readback_ref, error_code,
                                created_at, ended_at)
SELECT g.id, g.kind, g.tenant_id, g.project_id, g.lane_key, g.idempotency_key,
       g.content_digest, g.at_most_once, g.instance_level,
       CASE WHEN g.write_started_at IS NOT NULL THEN 'UNCERTAIN' ELSE 'FAILED' END,
       CASE WHEN g.write_started_at IS NOT NULL THEN 'LEASE_LOST_AFTER_WRITE'
            ELSE 'ATTEMPTS_EXHAUSTED' END,
       g.epoch, g.attempt, g.max_attempts, g.subject_account_id, g.run_at, g.expires_at,
       g.write_started_at, g.readback_ref,
       CASE WHEN g.write_started_at IS NOT NULL THEN 'lease_lost_after_write'
            ELSE 'lease_lost' END,
       g.created_at, clock.now
  FROM gone g, clock
RETURNING id, kind, stop_reason
