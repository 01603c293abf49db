-- Revokes one credential of a tenant. Returns the row only when it was live.
UPDATE wharf.inbox_credentials
SET revoked_at = now()
WHERE tenant_id = $1 AND credential_id = $2 AND revoked_at IS NULL
RETURNING credential_id
