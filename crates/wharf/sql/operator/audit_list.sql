-- A page of the one operator audit trail (0051: the library's rows and the console's) in the
-- order it was written, strictly after a cursor,
-- optionally for one action. Walks the primary key (or the per-action index).
-- $1 bigint action id (NULL: every action), $2 bigint after audit id (NULL: from the start),
-- $3 integer rows (<= 100).
SELECT audit_id, operation, action_id, actor, role, target, detail, correlation_id, recorded_at
  FROM wharf.operator_audit
 WHERE ($1::bigint IS NULL OR action_id = $1)
   AND audit_id > coalesce($2::bigint, 0)
 ORDER BY audit_id
 LIMIT $3
