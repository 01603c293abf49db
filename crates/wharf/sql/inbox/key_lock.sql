-- Locks one key until the transaction ends, for a removal decision.
-- $1 tenant, $2 project, $3 key id.
SELECT state, replay_window_seconds
  FROM wharf.inbox_keys
 WHERE tenant_id = $1 AND project_id = $2 AND key_id = $3
   FOR UPDATE
