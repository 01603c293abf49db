-- Ends unstarted actions whose expires_at passed: PROPOSED/ADMITTED -> CANCELLED / EXPIRED,
-- at most $1 per statement. "Unstarted" includes the write: an ADMITTED action whose earlier
-- attempt passed its fence (write_started_at set, e.g. a reclaim that then deferred) may
-- already be held by the provider, so it is not expired; it is claimed again and reads back.
-- The action moves to wharf.action_ended (0060).
-- $1 integer: batch bound. $2 timestamptz: "now" for tests; NULL means the database clock.
WITH clock AS MATERIALIZED (
    SELECT coalesce($2::timestamptz, now()) AS now
),
expired AS (
    SELECT a.id
      FROM wharf.action_live a, clock
     WHERE a.state IN ('PROPOSED', 'ADMITTED') AND a.expires_at IS NOT NULL
       AND a.expires_at <= clock.now AND a.write_started_at IS NULL
     ORDER BY a.expires_at
     LIMIT $1
       FOR UPDATE OF a SKIP LOCKED
),
gone AS (
    DELETE FROM wharf.action_live a
     USING expired
     WHERE a.id = expired.id AND a.state IN ('PROPOSED', 'ADMITTED') AND a.write_started_at IS NULL
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
       g.content_digest, g.at_most_once, g.instance_level, 'CANCELLED', 'EXPIRED', g.epoch,
       g.attempt, g.max_attempts, g.subject_account_id, g.run_at, g.expires_at,
       g.write_started_at, g.readback_ref, g.error_code, g.created_at, clock.now
  FROM gone g, clock
RETURNING id, kind
