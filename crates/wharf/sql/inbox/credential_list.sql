SELECT credential_id, tenant_id::text, account_id::text, device_id::text, created_at, revoked_at
FROM wharf.inbox_credentials
WHERE tenant_id = $1
ORDER BY credential_id
