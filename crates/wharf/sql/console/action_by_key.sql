-- The action of one idempotency key, live or ended (its key row, 0060).
SELECT action_id FROM wharf.action_key WHERE idempotency_key = $1
