-- Appends one operator-audit row.
-- $1 operation, $2 action id, $3 actor, $4 detail (a JSON object, never a payload),
-- $5 correlation id.
INSERT INTO wharf.operator_audit (operation, action_id, actor, detail, correlation_id)
VALUES ($1, $2, $3, $4, $5)
RETURNING audit_id
