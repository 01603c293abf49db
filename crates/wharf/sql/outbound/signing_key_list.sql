-- The signing keys of a tenant (of one project when $2 is not NULL), current and retired, oldest
-- first. Public halves only: the sealed private key never leaves the store through a listing.
-- $1 tenant, $2 project or NULL.
SELECT tenant_id, project_id, key_id, public_key, state, created_at, retired_at
  FROM wharf.outbound_signing_keys
 WHERE tenant_id = $1 AND ($2::text IS NULL OR project_id = $2)
 ORDER BY project_id, created_at, key_id
