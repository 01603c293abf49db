-- Every resolution of one action, oldest first (the last is the current finding).
-- $1: action id.
SELECT resolution_id, action_id, finding, note, actor, resent_action_id, correlation_id,
       recorded_at
  FROM wharf.action_resolution
 WHERE action_id = $1
 ORDER BY resolution_id
