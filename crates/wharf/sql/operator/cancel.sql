-- Cancels an unstarted action: PROPOSED or ADMITTED -> CANCELLED / OPERATOR. The row is locked
-- by action_lock.sql in the same transaction; the state condition repeats the decision so a
-- caller that skipped the lock still cannot cancel a claimed action.
-- $1: action id.
UPDATE wharf.action
   SET state = 'CANCELLED', stop_reason = 'OPERATOR', payload = NULL, ended_at = now()
 WHERE id = $1 AND state IN ('PROPOSED', 'ADMITTED')
RETURNING id
