-- A page of the operator audit, newest first, strictly before audit id $1 (NULL: the newest).
-- $2 rows (≤ 100). Walks the primary key backwards: a page costs its rows.
SELECT audit_id, operator::text, role, action, target, detail, correlation_id, recorded_at
FROM wharf.console_audit
WHERE audit_id < coalesce($1::bigint, 9223372036854775807)
ORDER BY audit_id DESC
LIMIT $2
