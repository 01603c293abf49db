-- Refuses a proposal: PROPOSED -> CANCELLED / REFUSED. Zero rows when the action is not PROPOSED.
-- $1: action id.
UPDATE wharf.action
   SET state = 'CANCELLED', stop_reason = 'REFUSED', payload = NULL, ended_at = now()
 WHERE id = $1 AND state = 'PROPOSED'
RETURNING id, kind
