-- Appends one operator-audit row. $1 operator, $2 role, $3 action, $4 target, $5 detail,
-- $6 correlation id.
INSERT INTO wharf.console_audit (operator, role, action, target, detail, correlation_id)
VALUES ($1, $2, $3, $4, $5, $6)
