-- Creates a tenant; returns no row when it already exists (creation is idempotent).
INSERT INTO wharf.inbox_tenants (tenant_id)
VALUES ($1)
ON CONFLICT (tenant_id) DO NOTHING
RETURNING tenant_id
