-- Records what an operator found out about an UNCERTAIN action (append-only).
-- $1 action id, $2 finding, $3 note, $4 actor, $5 resent action id (NULL: no resend),
-- $6 correlation id.
INSERT INTO wharf.action_resolution (action_id, finding, note, actor, resent_action_id,
                                     correlation_id)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING resolution_id, action_id, finding, note, actor, resent_action_id, correlation_id,
          recorded_at
