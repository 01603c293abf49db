-- Stores accepted envelopes: one permanent identity and one expiring payload each, in one
-- statement whatever the batch size (arrays, not one round trip per envelope).
-- $1 stream; then one array element per envelope: $2 event id, $3 idempotency key,
-- $4 sequence (text), $5 content digest, $6 event type, $7 key id, $8 outcome,
-- $9 correlation id, $10 occurred_at, $11 payload (canonical JSON text).
WITH incoming AS (
    SELECT *
    FROM unnest($2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[], $7::text[],
                $8::text[], $9::text[], $10::text[], $11::text[])
         AS t(event_id, idempotency_key, producer_sequence, content_sha256, event_type, key_id,
              outcome, correlation_id, occurred_at, payload)
), stored AS (
    INSERT INTO wharf.inbox_identities (stream_id, event_id, idempotency_key, producer_sequence,
                                        content_sha256, event_type, key_id, outcome,
                                        correlation_id)
    SELECT $1, event_id, idempotency_key, producer_sequence::numeric, content_sha256,
           event_type, key_id, outcome, correlation_id
    FROM incoming
    RETURNING identity_id, event_id
)
INSERT INTO wharf.inbox_payloads (identity_id, occurred_at, payload)
SELECT stored.identity_id, incoming.occurred_at, incoming.payload::jsonb
FROM stored JOIN incoming USING (event_id)
