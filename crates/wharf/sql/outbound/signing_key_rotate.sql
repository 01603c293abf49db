-- Makes a new key the current one of (tenant, project) in one statement: the active key (if
-- any) is retired, then the new one is inserted as active. The insert reads the whole `retired`
-- result first (the count), so the old key is retired before the new one meets the one-active
-- index; a concurrent rotation of the same scope makes this statement fail on that index
-- (unique_violation) rather than leave two current keys.
-- $1 tenant, $2 project, $3 key id, $4 public key (32 bytes), $5 sealed private key,
-- $6 fingerprint of the sealing server key (8 bytes).
-- Returns the new key's creation time.
WITH retired AS (
    UPDATE wharf.outbound_signing_keys
       SET state = 'retired', retired_at = now()
     WHERE tenant_id = $1 AND project_id = $2 AND state = 'active'
    RETURNING key_id
),
counted AS (
    SELECT count(*) AS retired FROM retired
)
INSERT INTO wharf.outbound_signing_keys
       (tenant_id, project_id, key_id, public_key, sealed_private_key, sealed_by)
SELECT $1, $2, $3, $4, $5, $6
  FROM counted
RETURNING created_at
