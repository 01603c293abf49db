-- Retained identities of a locked stream that share an event id, an idempotency key or a
-- sequence with any incoming envelope: everything the decision compares against.
SELECT event_id, idempotency_key, producer_sequence::text, content_sha256, outcome,
       correlation_id
FROM wharf.inbox_identities
WHERE stream_id = $1
  AND (event_id = ANY($2::text[])
       OR idempotency_key = ANY($3::text[])
       OR producer_sequence = ANY($4::text[]::numeric[]))
