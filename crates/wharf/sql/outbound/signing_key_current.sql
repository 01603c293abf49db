-- The current (active) signing key of (tenant, project), sealed, with what its seal is bound
-- to. No row when the scope has no key.
-- $1 tenant, $2 project.
SELECT key_id, public_key, sealed_private_key, sealed_by
  FROM wharf.outbound_signing_keys
 WHERE tenant_id = $1 AND project_id = $2 AND state = 'active'
