-- SPEC §3.4 step 8 in one round trip: the permanent identities, their expiring payloads, the
-- cursor and the redacted audit of every decision, written together under the stream lock.
-- Arrays carry one element per accepted envelope ($2..$11) or per decision ($19..$23), so the
-- cost is one statement whatever the batch size.
-- $1 stream; identities: $2 event id, $3 idempotency key, $4 sequence (text), $5 content
-- digest, $6 event type, $7 key id, $8 outcome, $9 correlation id, $10 occurred_at,
-- $11 payload (canonical JSON text); $12 the new cursor (text); audit scope: $13 tenant,
-- $14 project, $15 actor account, $16 actor device, $17 producer kind, $18 producer id; audit
-- rows: $19 event id SHA-256 hex, $20 sequence (text), $21 outcome, $22 reason,
-- $23 correlation id.
--
-- Identity ids are drawn from the identity column's sequence up front (the CTE is materialised,
-- so once per row), so each payload row knows its identity without joining the inserted rows
-- back to the input — a join whose generic plan was a nested loop over both sides.
WITH incoming AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('wharf.inbox_identities', 'identity_id'))
               AS identity_id,
           t.*
    FROM unnest($2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[], $7::text[],
                $8::text[], $9::text[], $10::text[], $11::text[])
         AS t(event_id, idempotency_key, producer_sequence, content_sha256, event_type, key_id,
              outcome, correlation_id, occurred_at, payload)
), stored AS (
    INSERT INTO wharf.inbox_identities (identity_id, stream_id, event_id, idempotency_key,
                                        producer_sequence, content_sha256, event_type, key_id,
                                        outcome, correlation_id)
    OVERRIDING SYSTEM VALUE
    SELECT identity_id, $1, event_id, idempotency_key, producer_sequence::numeric,
           content_sha256, event_type, key_id, outcome, correlation_id
    FROM incoming
    RETURNING identity_id
), payloads AS (
    INSERT INTO wharf.inbox_payloads (identity_id, occurred_at, payload)
    SELECT identity_id, occurred_at, payload::jsonb
    FROM incoming
    RETURNING identity_id
), cursor AS (
    UPDATE wharf.inbox_streams
    SET acknowledged_sequence = $12::text::numeric, updated_at = now()
    WHERE stream_id = $1 AND acknowledged_sequence <> $12::text::numeric
    RETURNING stream_id
), audited AS (
    INSERT INTO wharf.inbox_audit (action, tenant_id, project_id, actor_account, actor_device,
                                   producer_kind, producer_id, event_id_sha256,
                                   producer_sequence, outcome, reason, correlation_id)
    SELECT 'ingest', $13, $14, $15, $16, $17, $18, t.event_id_sha256,
           t.producer_sequence::numeric, t.outcome, t.reason, t.correlation_id
    FROM unnest($19::text[], $20::text[], $21::text[], $22::text[], $23::text[])
         AS t(event_id_sha256, producer_sequence, outcome, reason, correlation_id)
    RETURNING audit_id
)
SELECT (SELECT count(*) FROM stored) AS identities,
       (SELECT count(*) FROM payloads) AS payloads,
       (SELECT count(*) FROM audited) AS audited
