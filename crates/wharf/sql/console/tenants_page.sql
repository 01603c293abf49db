-- Tenants in id order after $1 (NULL: from the first), at most $2.
SELECT tenant_id::text, created_at FROM wharf.inbox_tenants
WHERE $1::text IS NULL OR tenant_id > $1
ORDER BY tenant_id LIMIT $2
