-- The redacted inbox audit of (tenant $1, project $2), newest first, strictly before
-- ($3 recorded_at, $4 audit id) (NULL: from the newest), at most $5, along inbox_audit_scope.
-- The columns are the audit's own, which never hold a credential, signature or payload.
SELECT audit_id, action, actor_account, actor_device, producer_kind, producer_id,
       event_id_sha256, producer_sequence::text, outcome, reason, sequence_before::text,
       sequence_after::text, correlation_id, recorded_at
FROM wharf.inbox_audit
WHERE tenant_id = $1 AND project_id = $2
  AND ($3::timestamptz IS NULL OR (recorded_at, audit_id) < ($3::timestamptz, $4::bigint))
ORDER BY recorded_at DESC, audit_id DESC
LIMIT $5
