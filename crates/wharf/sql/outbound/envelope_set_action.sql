-- Records the delivery action of an envelope just claimed in the same transaction.
-- $1 idempotency key, $2 action id.
UPDATE wharf.outbound_envelopes
   SET action_id = $2
 WHERE idempotency_key = $1 AND action_id IS NULL
