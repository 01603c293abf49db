-- One signing key's public half (for the receiving side's `wharf key add`).
-- $1 tenant, $2 project, $3 key id.
SELECT tenant_id, project_id, key_id, public_key, state, created_at, retired_at
  FROM wharf.outbound_signing_keys
 WHERE tenant_id = $1 AND project_id = $2 AND key_id = $3
