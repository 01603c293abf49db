SELECT tenant_id, created_at
FROM wharf.inbox_tenants
ORDER BY tenant_id
