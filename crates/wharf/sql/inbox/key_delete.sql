-- Deletes one revoked key (the caller checked, under key_lock.sql, that nothing it signed can be
-- replayed). $1 tenant, $2 project, $3 key id.
DELETE FROM wharf.inbox_keys
 WHERE tenant_id = $1 AND project_id = $2 AND key_id = $3 AND state = 'revoked'
RETURNING key_id
