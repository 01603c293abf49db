-- Claims an idempotency key for a newly signed envelope. No row when the key is taken; when
-- another transaction holds the key uncommitted, this waits for it to end first, so the answer
-- is always about a committed (or no) holder.
-- $1 key, $2 request digest, $3 tenant, $4 project, $5 destination URL, $6 event type,
-- $7 event id, $8 producer sequence, $9 key id, $10 canonical envelope JSON.
INSERT INTO wharf.outbound_envelopes
       (idempotency_key, request_digest, tenant_id, project_id, destination_url, event_type,
        event_id, producer_sequence, key_id, envelope)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING idempotency_key
