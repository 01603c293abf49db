-- Credentials of tenant $1 in id order after $2 (NULL: from the first), at most $3. Never the
-- token's hash.
SELECT credential_id, account_id::text, device_id::text, created_at, revoked_at
FROM wharf.inbox_credentials
WHERE tenant_id = $1 AND ($2::bigint IS NULL OR credential_id > $2)
ORDER BY credential_id LIMIT $3
