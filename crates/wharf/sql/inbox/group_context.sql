-- Everything the decisions of one group commit read once its streams are locked, in one round
-- trip. A statement of its own after group_lock.sql, never a CTE of it: a lock that waited sees
-- the stream row as committed by the transaction it waited for, but the rest of that statement
-- would still read the snapshot from before the wait and miss that transaction's identities.
-- Rows, by kind:
-- - 'match': retained identities sharing (stream, event id), (stream, idempotency key) or
--   (stream, sequence) with an incoming envelope (a row may come twice; the caller's maps
--   absorb that). The incoming values are unnested and joined, one index probe each, rather
--   than tested with `= ANY($n)`: under a prepared statement's generic plan, ANY over a
--   parameter array became a scan of the stream comparing every row with every element
--   (seconds for a 1,000-envelope batch on a stream of 15,000 identities);
-- - 'ahead': per locked stream, retained sequences in cursor+1 ..= cursor+$7 ascending (the
--   pure cursor walk needs only those);
-- - 'credential': the credentials of the group that are still live now, so a revocation that
--   committed before this statement refuses every envelope it would have admitted;
-- - 'key': the current state of every key the group's envelopes verified with (a cached key
--   may have been retired or revoked since), with the database clock.
-- $1 stream per candidate, $2 event ids, $3 idempotency keys, $4 sequences (text); $5 locked
-- streams, $6 their cursors (text), $7 ahead rows at most per stream; $8 credential ids;
-- $9 key tenants, $10 key projects, $11 key ids.
SELECT 'match' AS kind, i.stream_id, i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id,
       NULL::bigint AS credential_id, NULL::text AS key_tenant, NULL::text AS key_project,
       NULL::text AS key_id, NULL::bytea AS public_key, NULL::text AS state,
       NULL::timestamptz AS retired_at, NULL::bigint AS replay_window_seconds,
       NULL::timestamptz AS now
FROM unnest($1::bigint[], $2::text[]) AS e(stream_id, event_id)
JOIN wharf.inbox_identities i ON i.stream_id = e.stream_id AND i.event_id = e.event_id
UNION ALL
SELECT 'match', i.stream_id, i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM unnest($1::bigint[], $3::text[]) AS k(stream_id, idempotency_key)
JOIN wharf.inbox_identities i
  ON i.stream_id = k.stream_id AND i.idempotency_key = k.idempotency_key
UNION ALL
SELECT 'match', i.stream_id, i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM unnest($1::bigint[], $4::text[]) AS s(stream_id, producer_sequence)
JOIN wharf.inbox_identities i
  ON i.stream_id = s.stream_id AND i.producer_sequence = s.producer_sequence::numeric
UNION ALL
SELECT 'ahead', l.stream_id, NULL, NULL, a.producer_sequence::text, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM unnest($5::bigint[], $6::text[]) AS l(stream_id, cursor)
CROSS JOIN LATERAL (
    SELECT producer_sequence
    FROM wharf.inbox_identities
    WHERE stream_id = l.stream_id
      AND producer_sequence > l.cursor::numeric
      AND producer_sequence <= l.cursor::numeric + $7
    ORDER BY producer_sequence
    LIMIT $7
) a
UNION ALL
SELECT 'credential', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       c.credential_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM wharf.inbox_credentials c
WHERE c.credential_id = ANY($8::bigint[]) AND c.revoked_at IS NULL
UNION ALL
SELECT 'key', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, k.tenant_id, k.project_id, k.key_id, k.public_key, k.state, k.retired_at,
       k.replay_window_seconds, now()
FROM unnest($9::text[], $10::text[], $11::text[]) AS w(tenant_id, project_id, key_id)
JOIN wharf.inbox_keys k
  ON k.tenant_id = w.tenant_id AND k.project_id = w.project_id AND k.key_id = w.key_id
