-- The envelope emitted under an idempotency key, if any.
-- $1 idempotency key.
SELECT idempotency_key, request_digest, envelope, action_id
  FROM wharf.outbound_envelopes
 WHERE idempotency_key = $1
