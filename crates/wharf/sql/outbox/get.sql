-- One action as the outside sees it.
-- $1: action id.
SELECT id, kind, tenant_id, project_id, lane_key, idempotency_key, content_digest,
       at_most_once, instance_level, state, stop_reason, epoch, attempt, max_attempts, payload,
       subject_account_id, run_at, expires_at, lease_expires_at, write_started_at,
       readback_ref, error_code, created_at, ended_at
  FROM wharf.action
 WHERE id = $1
