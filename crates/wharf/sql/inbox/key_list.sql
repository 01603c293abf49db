-- Keys of a tenant, of one project when $2 is not NULL.
SELECT tenant_id::text, project_id::text, key_id, public_key, state, replay_window_seconds,
       created_at, retired_at, revoked_at
FROM wharf.inbox_keys
WHERE tenant_id = $1 AND ($2::text IS NULL OR project_id = $2)
ORDER BY project_id, created_at, key_id
