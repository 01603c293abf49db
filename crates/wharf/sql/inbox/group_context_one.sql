-- group_context.sql for a group of one envelope on one stream (a lone producer's single
-- request, the commonest group there is): the same rows, kinds and columns, from scalar
-- parameters.
--
-- Why a second text: group_context.sql takes arrays, and PostgreSQL prices a generic plan's
-- unnest of a parameter at 100 elements against the custom plan's exact count, so it plans that
-- statement again on every execution — 0.3 ms of a 1.5 ms request with one envelope, most of
-- the server's time (BENCHMARKS.md, inbox). With scalars the generic plan costs what a custom
-- one does and is reused after a few executions.
--
-- A generic plan is made once per connection and kept until the tables' statistics change, so
-- its shape must be right at every size, and on an empty, never analyzed table every index led
-- by stream_id costs the same: the probe for an event id was seen taking the sequence index and
-- filtering, a scan of the whole stream per envelope. So each identity probe reads the first
-- entry at or after the incoming value in its own index's order (ORDER BY the second column,
-- LIMIT 1) and tests equality outside: only that index yields the order without a sort, so it is
-- the cheapest path whatever the statistics say. The group's transaction turns sequential scans
-- off (inbox/group.rs), so a plan made while a table had one page is not a scan either.
--
-- $1 stream, $2 event id, $3 idempotency key, $4 sequence (text), $5 the stream's cursor
-- (text), $6 ahead rows at most, $7 credential id, $8 key tenant, $9 key project, $10 key id.
SELECT 'match' AS kind, i.stream_id, i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id,
       NULL::bigint AS credential_id, NULL::text AS key_tenant, NULL::text AS key_project,
       NULL::text AS key_id, NULL::bytea AS public_key, NULL::text AS state,
       NULL::timestamptz AS retired_at, NULL::bigint AS replay_window_seconds,
       NULL::timestamptz AS now
FROM (SELECT * FROM wharf.inbox_identities
      WHERE stream_id = $1::bigint AND event_id >= $2::text
      ORDER BY event_id LIMIT 1) i
WHERE i.event_id = $2::text
UNION ALL
SELECT 'match', i.stream_id, i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM (SELECT * FROM wharf.inbox_identities
      WHERE stream_id = $1::bigint AND idempotency_key >= $3::text
      ORDER BY idempotency_key LIMIT 1) i
WHERE i.idempotency_key = $3::text
UNION ALL
SELECT 'match', i.stream_id, i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM (SELECT * FROM wharf.inbox_identities
      WHERE stream_id = $1::bigint AND producer_sequence >= $4::text::numeric
      ORDER BY producer_sequence LIMIT 1) i
WHERE i.producer_sequence = $4::text::numeric
UNION ALL
SELECT 'ahead', a.stream_id, NULL, NULL, a.producer_sequence::text, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM (SELECT stream_id, producer_sequence
      FROM wharf.inbox_identities
      WHERE stream_id = $1::bigint
        AND producer_sequence > $5::text::numeric
        AND producer_sequence <= $5::text::numeric + $6::bigint
      ORDER BY producer_sequence
      LIMIT $6::bigint) a
UNION ALL
SELECT 'credential', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       c.credential_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM wharf.inbox_credentials c
WHERE c.credential_id = $7::bigint AND c.revoked_at IS NULL
UNION ALL
SELECT 'key', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, k.tenant_id, k.project_id, k.key_id, k.public_key, k.state, k.retired_at,
       k.replay_window_seconds, now()
FROM wharf.inbox_keys k
WHERE k.tenant_id = $8::text AND k.project_id = $9::text AND k.key_id = $10::text
