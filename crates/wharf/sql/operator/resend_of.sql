-- The action a resend stands in for, if it is one.
-- $1: action id.
SELECT resends_id FROM wharf.action_resend WHERE action_id = $1
