-- Verification keys of (tenant $1, project $2) in key id order after $3 (NULL: from the
-- first), at most $4. Public keys only: no private key is ever stored.
SELECT key_id, state, replay_window_seconds, created_at, retired_at, revoked_at
FROM wharf.inbox_keys
WHERE tenant_id = $1 AND project_id = $2 AND ($3::text IS NULL OR key_id > $3)
ORDER BY key_id LIMIT $4
