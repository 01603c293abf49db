-- Links a resend to the action it stands in for. A repeated link (the same resend asked for
-- twice) is a no-op: the resend's idempotency key already made it the same action.
-- $1 resend action id, $2 original action id.
INSERT INTO wharf.action_resend (action_id, resends_id)
VALUES ($1, $2)
ON CONFLICT (action_id) DO NOTHING
