-- $1 tenant, $2 account, $3 device (NULL: none), $4 first 8 bytes of the token hash, $5 the hash.
INSERT INTO wharf.inbox_credentials (tenant_id, account_id, device_id, token_lookup, token_sha256)
VALUES ($1, $2, $3, $4, $5)
RETURNING credential_id, created_at
