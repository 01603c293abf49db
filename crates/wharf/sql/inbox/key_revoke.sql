-- Revokes a key that is active or retired: it stops verifying at once.
UPDATE wharf.inbox_keys
SET state = 'revoked', revoked_at = now()
WHERE tenant_id = $1 AND project_id = $2 AND key_id = $3 AND state <> 'revoked'
RETURNING key_id
