-- $1 tenant, $2 project, $3 key id, $4 public key (32 bytes), $5 replay window in seconds.
-- Returns no row when the key id already exists in that scope.
INSERT INTO wharf.inbox_keys (tenant_id, project_id, key_id, public_key, replay_window_seconds)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tenant_id, project_id, key_id) DO NOTHING
RETURNING created_at
