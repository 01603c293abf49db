-- A page of the one operator audit trail (0051: the console's rows and the library's, for the
-- admin API and the CLI), newest first, strictly before audit id $1 (NULL: the newest).
-- $2 rows (≤ 100). Walks the primary key backwards: a page costs its rows. A library row has no
-- role or target: it names its action in action_id, and its detail is shown as its JSON.
SELECT audit_id, actor AS operator, role, operation AS action,
       coalesce(target, 'action ' || action_id, '') AS target,
       CASE WHEN role IS NOT NULL THEN coalesce(detail->>'result', '') ELSE detail::text END
           AS detail,
       action_id, correlation_id, recorded_at
FROM wharf.operator_audit
WHERE audit_id < coalesce($1::bigint, 9223372036854775807)
ORDER BY audit_id DESC
LIMIT $2
