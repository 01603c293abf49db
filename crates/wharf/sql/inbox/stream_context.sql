-- Everything the decisions on a locked stream read, in one round trip (the stream lock is held
-- while it runs, so every statement saved here is latency saved for every other sender):
-- - kind 'match': retained identities sharing an event id, an idempotency key or a sequence
--   with an incoming envelope;
-- - kind 'ahead': retained sequences in cursor+1 ..= cursor+$6 (for the pure cursor walk; only
--   those can continue the run, so at most $6 rows).
-- $1 stream, $2 event ids, $3 idempotency keys, $4 sequences (text), $5 cursor (text),
-- $6 ahead rows at most.
SELECT 'match' AS kind, event_id, idempotency_key, producer_sequence::text, content_sha256,
       outcome, correlation_id
FROM wharf.inbox_identities
WHERE stream_id = $1
  AND (event_id = ANY($2::text[])
       OR idempotency_key = ANY($3::text[])
       OR producer_sequence = ANY($4::text[]::numeric[]))
UNION ALL
(SELECT 'ahead', NULL, NULL, producer_sequence::text, NULL, NULL, NULL
 FROM wharf.inbox_identities
 WHERE stream_id = $1
   AND producer_sequence > $5::text::numeric
   AND producer_sequence <= $5::text::numeric + $6
 ORDER BY producer_sequence
 LIMIT $6)
