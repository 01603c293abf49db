-- Creates a stream if it is missing; the caller then locks it with stream_lock.sql.
INSERT INTO wharf.inbox_streams (tenant_id, project_id, producer_kind, producer_id)
VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id, project_id, producer_kind, producer_id) DO NOTHING
