-- The existing actions of some idempotency keys, with their content digests.
-- $1: the keys.
SELECT id, idempotency_key, content_digest
  FROM wharf.action
 WHERE idempotency_key = ANY($1::text[])
