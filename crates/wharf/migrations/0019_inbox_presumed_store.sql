-- A lone envelope's whole store in one statement (issue 19): wharf.inbox_store_presumed, which
-- `sql/inbox/store_presumed.sql` calls outside any transaction, so one round trip locks the
-- stream, checks it, writes and commits, where the ordinary way takes four (BEGIN, lock and
-- read, write, COMMIT). Owned by `wharf::inbox::group` (`store_presumed`), which decides the
-- envelope in Rust, with the same pure StreamRun as any group, against the state its sequence
-- presumes: the stream's cursor one below the sequence, nothing retained at or beyond it, none
-- of its event id and idempotency key retained, its credential live and its key active with
-- the public key that verified it. There the decision is always to store it (accept-delayed,
-- in-order) and move the cursor to its sequence. This function holds that presumption against
-- the database under the stream's lock and writes the decision (the identity, its payload, the
-- cursor and the audit row the caller built) only if every part of it holds; otherwise it
-- writes nothing and returns false, and the caller decides the envelope the ordinary way.
--
-- The lock and the snapshot: as in sql/inbox/group_lock_context_one.sql, FOR UPDATE waits for
-- a holder and returns the stream's newest row version, while the probes read the statement's
-- snapshot, taken before the wait. Every store of an identity writes a new version of its
-- stream's row (group_commit.sql, and this function), so the row the snapshot sees is the one
-- locked (the same ctid) exactly when no identity was stored on the stream after the snapshot;
-- the presumption requires that too, so no probe can miss a newer identity.
--
-- Why a function: only its SET clause turns sequential scans off for a statement that runs
-- outside a transaction (the group's transaction does it with SET LOCAL, inbox/group.rs), so
-- the plan PostgreSQL keeps for this statement, made at whatever size the tables had then,
-- finds every row by index at every size. Each probe reads the first entry at or after the
-- incoming value in its own index's order, for the reason group_lock_context_one.sql gives.
--
-- The commit: called outside a transaction, the call is its own transaction, committed (and
-- durable, under synchronous_commit) before PostgreSQL answers ReadyForQuery, which sqlx waits
-- for before it hands back the row. Nothing here is deferred. A write of anything but all or
-- nothing raises, so it cannot commit.
CREATE FUNCTION wharf.inbox_store_presumed(
    p_tenant text, p_project text, p_producer_kind text, p_producer_id text,
    p_event_id text, p_idempotency_key text, p_sequence numeric, p_digest bytea,
    p_event_type text, p_key_id text, p_outcome text, p_correlation_id text,
    p_occurred_at text, p_payload jsonb, p_credential_id bigint, p_public_key bytea,
    p_audit_tenant text, p_audit_project text, p_audit_account text, p_audit_device text,
    p_event_id_sha256 text, p_audit_outcome text, p_reason text)
RETURNS boolean
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
    -- Rows written: identities, payloads, cursors, audit rows.
    written bigint[];
BEGIN
    WITH locked AS MATERIALIZED (
        SELECT s.stream_id, s.acknowledged_sequence, s.ctid AS version
        FROM wharf.inbox_streams s
        WHERE s.tenant_id = p_tenant AND s.project_id = p_project
          AND s.producer_kind = p_producer_kind AND s.producer_id = p_producer_id
        FOR UPDATE
    ), seen AS MATERIALIZED (
        SELECT v.ctid AS version
        FROM wharf.inbox_streams v
        WHERE v.tenant_id = p_tenant AND v.project_id = p_project
          AND v.producer_kind = p_producer_kind AND v.producer_id = p_producer_id
    ), presumed AS MATERIALIZED (
        SELECT l.stream_id
        FROM locked l
        WHERE l.acknowledged_sequence = p_sequence - 1
          AND l.version = (SELECT version FROM seen)
          AND NOT EXISTS (
              SELECT FROM (SELECT i.event_id FROM wharf.inbox_identities i
                           WHERE i.stream_id = l.stream_id AND i.event_id >= p_event_id
                           ORDER BY i.event_id LIMIT 1) e
              WHERE e.event_id = p_event_id)
          AND NOT EXISTS (
              SELECT FROM (SELECT i.idempotency_key FROM wharf.inbox_identities i
                           WHERE i.stream_id = l.stream_id
                             AND i.idempotency_key >= p_idempotency_key
                           ORDER BY i.idempotency_key LIMIT 1) k
              WHERE k.idempotency_key = p_idempotency_key)
          AND NOT EXISTS (
              SELECT FROM (SELECT i.producer_sequence FROM wharf.inbox_identities i
                           WHERE i.stream_id = l.stream_id
                             AND i.producer_sequence >= p_sequence
                           ORDER BY i.producer_sequence LIMIT 1) q)
          AND EXISTS (
              SELECT FROM wharf.inbox_credentials c
              WHERE c.credential_id = p_credential_id AND c.revoked_at IS NULL)
          AND EXISTS (
              SELECT FROM wharf.inbox_keys k
              WHERE k.tenant_id = p_tenant AND k.project_id = p_project AND k.key_id = p_key_id
                AND k.state = 'active' AND k.public_key = p_public_key)
    ), incoming AS MATERIALIZED (
        SELECT nextval(pg_get_serial_sequence('wharf.inbox_identities', 'identity_id'))
                   AS identity_id,
               p.stream_id
        FROM presumed p
    ), stored AS (
        INSERT INTO wharf.inbox_identities (identity_id, stream_id, event_id, idempotency_key,
                                            producer_sequence, content_sha256, event_type, key_id,
                                            outcome, correlation_id)
        OVERRIDING SYSTEM VALUE
        SELECT identity_id, stream_id, p_event_id, p_idempotency_key, p_sequence, p_digest,
               p_event_type, p_key_id, p_outcome, p_correlation_id
        FROM incoming
        RETURNING identity_id
    ), payloads AS (
        INSERT INTO wharf.inbox_payloads (identity_id, occurred_at, payload)
        SELECT identity_id, p_occurred_at, p_payload
        FROM incoming
        RETURNING identity_id
    ), moved AS (
        UPDATE wharf.inbox_streams s
        SET acknowledged_sequence = p_sequence, updated_at = now()
        FROM presumed p
        WHERE s.stream_id = p.stream_id
        RETURNING s.stream_id
    ), audited AS (
        INSERT INTO wharf.inbox_audit (action, tenant_id, project_id, actor_account, actor_device,
                                       producer_kind, producer_id, event_id_sha256,
                                       producer_sequence, outcome, reason, correlation_id)
        SELECT 'ingest', p_audit_tenant, p_audit_project, p_audit_account, p_audit_device,
               p_producer_kind, p_producer_id, p_event_id_sha256, p_sequence, p_audit_outcome,
               p_reason, p_correlation_id
        FROM presumed
        RETURNING audit_id
    )
    SELECT ARRAY[(SELECT count(*) FROM stored), (SELECT count(*) FROM payloads),
                 (SELECT count(*) FROM moved), (SELECT count(*) FROM audited)]
        INTO written;
    IF written = ARRAY[1, 1, 1, 1]::bigint[] THEN
        RETURN true;
    ELSIF written = ARRAY[0, 0, 0, 0]::bigint[] THEN
        RETURN false;
    END IF;
    RAISE EXCEPTION 'a presumed store wrote % (identities, payloads, cursors, audit rows)',
        written;
END
$$;
