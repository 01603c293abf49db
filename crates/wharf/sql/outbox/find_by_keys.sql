-- The existing actions of some idempotency keys, with their content digests: the key rows
-- (wharf.action_key), which stay from enqueue until retention or erasure, live or ended.
-- $1: the keys.
SELECT action_id AS id, idempotency_key, content_digest
  FROM wharf.action_key
 WHERE idempotency_key = ANY($1::text[])
