-- Candidates for a presented token: rows whose hash starts with the same 8 bytes. The caller
-- compares the full hash in constant time. Revoked rows are returned too, so that a revoked
-- token costs the same as a live one.
SELECT credential_id, tenant_id::text, account_id::text, device_id::text, token_sha256,
       revoked_at IS NOT NULL AS revoked
FROM wharf.inbox_credentials
WHERE token_lookup = $1
LIMIT 8
