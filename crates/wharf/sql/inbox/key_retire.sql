-- Retires an active key: it keeps verifying until retired_at + replay window.
UPDATE wharf.inbox_keys
SET state = 'retired', retired_at = now()
WHERE tenant_id = $1 AND project_id = $2 AND key_id = $3 AND state = 'active'
RETURNING key_id
