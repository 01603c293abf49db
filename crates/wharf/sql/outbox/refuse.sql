-- Refuses a proposal: PROPOSED -> CANCELLED / REFUSED, moved to wharf.action_ended (0060).
-- Zero rows when the action is not PROPOSED.
-- $1: action id.
WITH gone AS (
    DELETE FROM wharf.action_live a
     WHERE a.id = $1 AND a.state = 'PROPOSED'
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
       g.content_digest, g.at_most_once, g.instance_level, 'CANCELLED', 'REFUSED', g.epoch,
       g.attempt, g.max_attempts, g.subject_account_id, g.run_at, g.expires_at,
       g.write_started_at, g.readback_ref, g.error_code, g.created_at, now()
  FROM gone g
RETURNING id, kind
