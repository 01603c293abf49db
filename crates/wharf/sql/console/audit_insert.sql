-- Appends one console row to the one operator audit trail (0051). $1 operator, $2 role,
-- $3 action, $4 target, $5 detail (the result or the reason, kept as {"result": …} so the
-- column stays the JSON object the library's rows hold), $6 correlation id, $7 the action it
-- was done to (NULL: none).
INSERT INTO wharf.operator_audit (actor, role, operation, target, detail, correlation_id, action_id)
VALUES ($1, $2, $3, $4, jsonb_build_object('result', $5::text), $6, $7)
