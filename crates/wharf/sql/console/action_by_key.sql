-- The action holding idempotency key $1, if any (the unique index answers it).
SELECT id FROM wharf.action WHERE idempotency_key = $1
