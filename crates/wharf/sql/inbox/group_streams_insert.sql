-- Creates the streams of a group commit that are missing, in key order (so concurrent group
-- commits creating the same streams wait for each other in one order); the caller then locks
-- them with group_lock.sql. $1 tenants, $2 projects, $3 producer kinds, $4 producer ids.
INSERT INTO wharf.inbox_streams (tenant_id, project_id, producer_kind, producer_id)
SELECT tenant_id, project_id, producer_kind, producer_id
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
     AS k(tenant_id, project_id, producer_kind, producer_id)
ORDER BY tenant_id, project_id, producer_kind, producer_id
ON CONFLICT (tenant_id, project_id, producer_kind, producer_id) DO NOTHING
