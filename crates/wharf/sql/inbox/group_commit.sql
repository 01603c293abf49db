-- SPEC §3.4 step 8 for a group commit in one round trip: the permanent identities, their
-- expiring payloads, the cursors and the redacted audit of every decision of every request in
-- the group, written together under the locks of group_lock.sql. Arrays carry one element per
-- accepted envelope, per stream written (cursor moved or identity stored) or per decision, so
-- the cost is one statement whatever the group's size.
-- Identities: $1 stream, $2 event id, $3 idempotency key, $4 sequence (text), $5 content
-- digest, $6 event type, $7 key id, $8 outcome, $9 correlation id, $10 occurred_at,
-- $11 payload (canonical JSON text); cursors: $12 stream, $13 new cursor (text); audit rows:
-- $14 tenant, $15 project, $16 actor account, $17 actor device, $18 producer kind,
-- $19 producer id, $20 event id SHA-256 hex, $21 sequence (text), $22 outcome, $23 reason,
-- $24 correlation id.
-- Identity ids are drawn from the identity column's sequence up front (the CTE is materialised,
-- so once per row), so each payload row knows its identity without joining the inserted rows
-- back to the input — a join whose generic plan was a nested loop over both sides.
-- The sequence is named as a regclass constant, resolved once when the statement is planned:
-- nextval(pg_get_serial_sequence(...)) looked the name up in the catalogs for every row: 3 µs a
-- row against 0.3 µs, where the whole write costs 30-40 µs an envelope.
WITH incoming AS MATERIALIZED (
    SELECT nextval('wharf.inbox_identities_identity_id_seq'::regclass) AS identity_id,
           t.*
    FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[],
                $7::text[], $8::text[], $9::text[], $10::text[], $11::text[])
         AS t(stream_id, event_id, idempotency_key, producer_sequence, content_sha256,
              event_type, key_id, outcome, correlation_id, occurred_at, payload)
), stored AS (
    INSERT INTO wharf.inbox_identities (identity_id, stream_id, event_id, idempotency_key,
                                        producer_sequence, content_sha256, event_type, key_id,
                                        outcome, correlation_id)
    OVERRIDING SYSTEM VALUE
    SELECT identity_id, stream_id, event_id, idempotency_key, producer_sequence::numeric,
           content_sha256, event_type, key_id, outcome, correlation_id
    FROM incoming
    RETURNING identity_id
), payloads AS (
    INSERT INTO wharf.inbox_payloads (identity_id, occurred_at, payload)
    SELECT identity_id, occurred_at, payload::jsonb
    FROM incoming
    RETURNING identity_id
), cursor AS (
    -- Every stream given here gets a new row version, even when its cursor stays (an envelope
    -- stored beyond a gap): the caller lists each stream whose cursor moved or that stored an
    -- identity, and group_lock_context_one.sql tells a stale read by the stream row's version.
    UPDATE wharf.inbox_streams s
    SET acknowledged_sequence = c.cursor::numeric,
        updated_at = CASE WHEN s.acknowledged_sequence <> c.cursor::numeric THEN now()
                          ELSE s.updated_at END
    FROM unnest($12::bigint[], $13::text[]) AS c(stream_id, cursor)
    WHERE s.stream_id = c.stream_id
    RETURNING s.stream_id
), audited AS (
    INSERT INTO wharf.inbox_audit (action, tenant_id, project_id, actor_account, actor_device,
                                   producer_kind, producer_id, event_id_sha256,
                                   producer_sequence, outcome, reason, correlation_id)
    SELECT 'ingest', t.tenant_id, t.project_id, t.actor_account, t.actor_device,
           t.producer_kind, t.producer_id, t.event_id_sha256, t.producer_sequence::numeric,
           t.outcome, t.reason, t.correlation_id
    FROM unnest($14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[],
                $20::text[], $21::text[], $22::text[], $23::text[], $24::text[])
         AS t(tenant_id, project_id, actor_account, actor_device, producer_kind, producer_id,
              event_id_sha256, producer_sequence, outcome, reason, correlation_id)
    RETURNING audit_id
)
SELECT (SELECT count(*) FROM stored) AS identities,
       (SELECT count(*) FROM payloads) AS payloads,
       (SELECT count(*) FROM audited) AS audited
