-- The inbox (SPEC §3): tenants, credentials, verification keys, streams, permanent identities,
-- expiring payloads, and the append-only audit.
--
-- Projects are implicit: a project exists in a tenant as soon as something names it (a key, a
-- stream). A separate project table would add a step to every setup and protect nothing, because
-- every row that matters is already scoped by (tenant_id, project_id) and an envelope can only
-- land in a project that has a verification key.
--
-- Sequences are u64 on the wire (SPEC §3.1), wider than bigint, so they are numeric(20, 0) here
-- with a check for the u64 range; Rust binds and reads them as text. 0 in a cursor means
-- "nothing acknowledged yet" because producer sequences start at 1.

CREATE DOMAIN wharf.inbox_identity AS text
    CHECK (VALUE ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$');

CREATE DOMAIN wharf.inbox_sequence AS numeric(20, 0)
    CHECK (VALUE >= 0 AND VALUE <= 18446744073709551615);

CREATE TABLE wharf.inbox_tenants (
    tenant_id  wharf.inbox_identity PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Bearer credentials. The token itself is never stored: only SHA-256 of its 32 random bytes.
-- `token_lookup` (the first 8 bytes of that hash) finds the candidate row; the full hash is then
-- compared in constant time in Rust, so the database index never sees the secret-derived value
-- it would compare byte by byte.
CREATE TABLE wharf.inbox_credentials (
    credential_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     wharf.inbox_identity NOT NULL REFERENCES wharf.inbox_tenants (tenant_id),
    account_id    wharf.inbox_identity NOT NULL,
    device_id     wharf.inbox_identity,
    token_lookup  bytea NOT NULL CHECK (octet_length(token_lookup) = 8),
    token_sha256  bytea NOT NULL UNIQUE CHECK (octet_length(token_sha256) = 32),
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz
);
CREATE INDEX inbox_credentials_lookup ON wharf.inbox_credentials (token_lookup);

-- Ed25519 verification keys, scoped to (tenant, project). Only public keys live here; a
-- generated private key goes back to the operator and is never stored.
-- A retired key keeps verifying until retired_at + replay_window_seconds; a revoked one stops
-- at once. States only move forward (active -> retired -> revoked, or active -> revoked).
CREATE TABLE wharf.inbox_keys (
    tenant_id             wharf.inbox_identity NOT NULL REFERENCES wharf.inbox_tenants (tenant_id),
    project_id            wharf.inbox_identity NOT NULL,
    key_id                text NOT NULL CHECK (octet_length(key_id) BETWEEN 1 AND 128),
    public_key            bytea NOT NULL CHECK (octet_length(public_key) = 32),
    state                 text NOT NULL DEFAULT 'active'
                          CHECK (state IN ('active', 'retired', 'revoked')),
    replay_window_seconds bigint NOT NULL CHECK (replay_window_seconds >= 0),
    created_at            timestamptz NOT NULL DEFAULT now(),
    retired_at            timestamptz,
    revoked_at            timestamptz,
    PRIMARY KEY (tenant_id, project_id, key_id),
    CHECK ((state = 'active') = (retired_at IS NULL AND revoked_at IS NULL)),
    CHECK ((state = 'revoked') = (revoked_at IS NOT NULL))
);

-- One stream per (tenant, project, producer). The producer is the credential's device, or its
-- account when the credential names no device; producer_kind keeps the two namespaces apart so
-- account "x" and device "x" are never one stream. Never the key id: rotation keeps the stream.
CREATE TABLE wharf.inbox_streams (
    stream_id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id             wharf.inbox_identity NOT NULL REFERENCES wharf.inbox_tenants (tenant_id),
    project_id            wharf.inbox_identity NOT NULL,
    producer_kind         text NOT NULL CHECK (producer_kind IN ('device', 'account')),
    producer_id           wharf.inbox_identity NOT NULL,
    -- The contiguous cursor: every sequence 1..=acknowledged_sequence is retained or was skipped
    -- by an operator.
    acknowledged_sequence wharf.inbox_sequence NOT NULL DEFAULT 0,
    -- Sequences below the floor are refused as replays unless they are duplicates.
    replay_floor          wharf.inbox_sequence NOT NULL DEFAULT 1,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, project_id, producer_kind, producer_id),
    -- A floor above cursor + 1 would refuse sequences that were never acknowledged.
    CHECK (replay_floor >= 1 AND replay_floor <= acknowledged_sequence + 1)
);

-- Permanent identities of accepted envelopes. Never updated, never deleted (trigger below), so
-- an event id, idempotency key or sequence can never become new again, even after its payload
-- expired. content_sha256 is Envelope::content_digest (the canonical envelope without integrity).
CREATE TABLE wharf.inbox_identities (
    identity_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream_id         bigint NOT NULL REFERENCES wharf.inbox_streams (stream_id),
    event_id          text NOT NULL CHECK (octet_length(event_id) = 26),
    idempotency_key   text NOT NULL CHECK (octet_length(idempotency_key) BETWEEN 1 AND 256),
    producer_sequence wharf.inbox_sequence NOT NULL CHECK (producer_sequence >= 1),
    content_sha256    bytea NOT NULL CHECK (octet_length(content_sha256) = 32),
    event_type        text NOT NULL,
    key_id            text NOT NULL,
    outcome           text NOT NULL CHECK (outcome IN ('accept-delayed', 'accept-reordered')),
    correlation_id    text NOT NULL,
    accepted_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (stream_id, event_id),
    UNIQUE (stream_id, idempotency_key),
    UNIQUE (stream_id, producer_sequence)
);
-- Which identities a key accepted: a revoked key may be dropped only when none can be replayed.
CREATE INDEX inbox_identities_key ON wharf.inbox_identities (key_id);

-- Expiring payloads, one per identity. Retention deletes rows here and nowhere else.
CREATE TABLE wharf.inbox_payloads (
    identity_id bigint PRIMARY KEY REFERENCES wharf.inbox_identities (identity_id),
    occurred_at text NOT NULL,
    payload     jsonb NOT NULL,
    stored_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_payloads_stored_at ON wharf.inbox_payloads (stored_at);

-- The redacted audit: one row per authenticated ingest decision and per operator action.
-- Never the credential, the signature or the payload; the event id only as SHA-256 hex.
CREATE TABLE wharf.inbox_audit (
    audit_id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action            text NOT NULL CHECK (action IN ('ingest', 'stream-skip', 'stream-advance-floor')),
    tenant_id         text NOT NULL,
    -- NULL only when the request named a project that is not a valid identity.
    project_id        text,
    actor_account     text NOT NULL,
    actor_device      text,
    producer_kind     text,
    producer_id       text,
    event_id_sha256   text CHECK (event_id_sha256 ~ '^[0-9a-f]{64}$'),
    producer_sequence wharf.inbox_sequence,
    outcome           text NOT NULL,
    reason            text NOT NULL,
    -- Operator actions: the cursor or floor before and after.
    sequence_before   wharf.inbox_sequence,
    sequence_after    wharf.inbox_sequence,
    correlation_id    text NOT NULL,
    recorded_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_audit_scope ON wharf.inbox_audit (tenant_id, project_id, recorded_at);

CREATE FUNCTION wharf.inbox_refuse_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'wharf.% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER inbox_identities_append_only
    BEFORE UPDATE OR DELETE ON wharf.inbox_identities
    FOR EACH ROW EXECUTE FUNCTION wharf.inbox_refuse_change();
CREATE TRIGGER inbox_identities_no_truncate
    BEFORE TRUNCATE ON wharf.inbox_identities
    FOR EACH STATEMENT EXECUTE FUNCTION wharf.inbox_refuse_change();
CREATE TRIGGER inbox_audit_append_only
    BEFORE UPDATE OR DELETE ON wharf.inbox_audit
    FOR EACH ROW EXECUTE FUNCTION wharf.inbox_refuse_change();
CREATE TRIGGER inbox_audit_no_truncate
    BEFORE TRUNCATE ON wharf.inbox_audit
    FOR EACH STATEMENT EXECUTE FUNCTION wharf.inbox_refuse_change();
