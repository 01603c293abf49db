-- stream_lock.sql and group_context.sql in one statement, for a group of one envelope on one
-- stream (a lone producer's single request, the commonest group there is): it locks the stream
-- and reads the same rows, kinds and columns as group_context.sql, from scalar parameters, in
-- one round trip instead of two.
--
-- Why the read may be repeated. A statement reads with the snapshot it took when it started,
-- and FOR UPDATE waits for the lock after that: if another transaction held the stream and
-- committed meanwhile, the lock returns the stream's newest row version (PostgreSQL rechecks
-- the row it waited for), but this statement's identity reads do not see what that transaction
-- wrote. Every transaction that stores an identity writes a new version of its stream's row
-- (group_commit.sql), and identities are written nowhere else, so the stream row this statement
-- sees by its snapshot is the one it locked (the same ctid) exactly when no identity was stored
-- on the stream after the snapshot. The 'stream' row says so in `current`; when it is false the
-- caller runs this statement again: the lock is then held already, the new snapshot follows it,
-- and the second read is current. A stream that does not exist yet returns no 'stream' row
-- (the caller creates it and runs this again).
--
-- Why the scalar form (BENCHMARKS.md, inbox): group_context.sql takes arrays, and PostgreSQL
-- prices a generic plan's unnest of a parameter at 100 elements against the custom plan's
-- exact count, so it plans that statement again on every execution, 0.3 ms of a 1.5 ms request
-- with one envelope. With scalars the generic plan costs what a custom one does and is reused.
--
-- A generic plan is made once per connection and kept until the tables' statistics change, so
-- its shape must be right at every size, and on an empty, never analyzed table every index led
-- by stream_id costs the same: the probe for an event id was seen taking the sequence index and
-- filtering, a scan of the whole stream per envelope. So each identity probe reads the first
-- entry at or after the incoming value in its own index's order (ORDER BY the second column,
-- LIMIT 1) and tests equality outside: only that index yields the order without a sort, so it is
-- the cheapest path whatever the statistics say. The group's transaction turns sequential scans
-- off (inbox/group.rs), so a plan made while a table had one page is not a scan either.
-- tests/it/inbox/plans.rs holds the plan to this.
--
-- $1 tenant, $2 project, $3 producer kind, $4 producer id (the stream's key); $5 event id,
-- $6 idempotency key, $7 sequence (text); $8 ahead rows at most; $9 credential id; $10 key
-- tenant, $11 key project, $12 key id.
-- Columns as group_context.sql's, then the 'stream' row's own: cursor and replay floor (text,
-- they are u64) and `current`.
WITH locked AS MATERIALIZED (
    SELECT s.stream_id, s.acknowledged_sequence, s.replay_floor, s.ctid AS version
    FROM wharf.inbox_streams s
    WHERE s.tenant_id = $1::text AND s.project_id = $2::text AND s.producer_kind = $3::text
      AND s.producer_id = $4::text
    FOR UPDATE
), seen AS MATERIALIZED (
    SELECT v.ctid AS version
    FROM wharf.inbox_streams v
    WHERE v.tenant_id = $1::text AND v.project_id = $2::text AND v.producer_kind = $3::text
      AND v.producer_id = $4::text
)
SELECT 'stream' AS kind, l.stream_id, NULL::text AS event_id, NULL::text AS idempotency_key,
       NULL::text AS producer_sequence, NULL::bytea AS content_sha256, NULL::text AS outcome,
       NULL::text AS correlation_id, NULL::bigint AS credential_id, NULL::text AS key_tenant,
       NULL::text AS key_project, NULL::text AS key_id, NULL::bytea AS public_key,
       NULL::text AS state, NULL::timestamptz AS retired_at,
       NULL::bigint AS replay_window_seconds, NULL::timestamptz AS now,
       l.acknowledged_sequence::text AS cursor, l.replay_floor::text AS replay_floor,
       coalesce(l.version = (SELECT version FROM seen), false) AS current
FROM locked l
UNION ALL
SELECT 'match', i.stream_id, i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM (SELECT * FROM wharf.inbox_identities
      WHERE stream_id = (SELECT stream_id FROM locked) AND event_id >= $5::text
      ORDER BY event_id LIMIT 1) i
WHERE i.event_id = $5::text
UNION ALL
SELECT 'match', i.stream_id, i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM (SELECT * FROM wharf.inbox_identities
      WHERE stream_id = (SELECT stream_id FROM locked) AND idempotency_key >= $6::text
      ORDER BY idempotency_key LIMIT 1) i
WHERE i.idempotency_key = $6::text
UNION ALL
SELECT 'match', i.stream_id, i.event_id, i.idempotency_key, i.producer_sequence::text,
       i.content_sha256, i.outcome, i.correlation_id,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM (SELECT * FROM wharf.inbox_identities
      WHERE stream_id = (SELECT stream_id FROM locked) AND producer_sequence >= $7::text::numeric
      ORDER BY producer_sequence LIMIT 1) i
WHERE i.producer_sequence = $7::text::numeric
UNION ALL
SELECT 'ahead', a.stream_id, NULL, NULL, a.producer_sequence::text, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM (SELECT stream_id, producer_sequence
      FROM wharf.inbox_identities
      WHERE stream_id = (SELECT stream_id FROM locked)
        AND producer_sequence > (SELECT acknowledged_sequence FROM locked)
        AND producer_sequence <= (SELECT acknowledged_sequence FROM locked) + $8::bigint
      ORDER BY producer_sequence
      LIMIT $8::bigint) a
UNION ALL
SELECT 'credential', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       c.credential_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM wharf.inbox_credentials c
WHERE c.credential_id = $9::bigint AND c.revoked_at IS NULL
UNION ALL
SELECT 'key', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, k.tenant_id, k.project_id, k.key_id, k.public_key, k.state, k.retired_at,
       k.replay_window_seconds, now(), NULL, NULL, NULL
FROM wharf.inbox_keys k
WHERE k.tenant_id = $10::text AND k.project_id = $11::text AND k.key_id = $12::text
