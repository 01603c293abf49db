-- Everything the decisions on a locked stream read, in one round trip (the stream lock is held
-- while it runs, so every statement saved here is latency saved for every other sender):
-- - kind 'match': retained identities sharing an event id, an idempotency key or a sequence
--   with an incoming envelope;
-- - kind 'ahead': retained sequences in cursor+1 ..= cursor+$6 (for the pure cursor walk; only
--   those can continue the run, so at most $6 rows).
-- The incoming values are unnested and joined, one index probe each, rather than tested with
-- `= ANY($n)`: once PostgreSQL switches a prepared statement to its generic plan, `ANY` over a
-- parameter array becomes a scan of the stream comparing every row with every element, which
-- measured seconds for a 1,000-envelope batch on a stream of 15,000 identities.
-- A row may come back twice (matching on two identities); the caller's maps absorb that.
-- $1 stream, $2 event ids, $3 idempotency keys, $4 sequences (text), $5 cursor (text),
-- $6 ahead rows at most.
SELECT 'match' AS kind, i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id
FROM unnest($2::text[]) AS e(event_id)
JOIN wharf.inbox_identities i ON i.stream_id = $1 AND i.event_id = e.event_id
UNION ALL
SELECT 'match', i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id
FROM unnest($3::text[]) AS k(idempotency_key)
JOIN wharf.inbox_identities i ON i.stream_id = $1 AND i.idempotency_key = k.idempotency_key
UNION ALL
SELECT 'match', i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id
FROM unnest($4::text[]) AS s(producer_sequence)
JOIN wharf.inbox_identities i
  ON i.stream_id = $1 AND i.producer_sequence = s.producer_sequence::numeric
UNION ALL
(SELECT 'ahead', NULL, NULL, producer_sequence::text, NULL, NULL, NULL
 FROM wharf.inbox_identities
 WHERE stream_id = $1
   AND producer_sequence > $5::text::numeric
   AND producer_sequence <= $5::text::numeric + $6
 ORDER BY producer_sequence
 LIMIT $6)
