-- Outbound envelopes (SPEC §3.8): the server's own signing keys, the per-stream producer
-- sequences, the emitted envelopes kept immutable under their idempotency keys, and the index
-- that pages dead letters.
--
-- Owned by `wharf::outbound`. The delivery itself is an `envelope` action in wharf.action (the
-- outbox's table); nothing here refers to it by foreign key, because outbox retention deletes
-- ended actions while an emitted envelope must stay answerable under its key.

-- The server's Ed25519 signing keys, one scope per (tenant, project): the same scope a receiving
-- wharf files the public key under (`wharf key add`), so one key id means the same thing on
-- both ends. The private key is stored only sealed (ChaCha20-Poly1305 under the server key, the
-- scope, key id and public key as associated data); `sealed_by` is the server key's 8-byte
-- fingerprint, so opening under the wrong server key is reported as that and not as tampering.
-- A retired key is kept: its public half still verifies envelopes it signed.
CREATE TABLE wharf.outbound_signing_keys (
    tenant_id   text NOT NULL CHECK (tenant_id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    project_id  text NOT NULL CHECK (project_id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    key_id      text NOT NULL CHECK (octet_length(key_id) BETWEEN 1 AND 128),
    public_key  bytea NOT NULL CHECK (octet_length(public_key) = 32),
    -- version (1) || nonce (12) || sealed seed (32) || tag (16)
    sealed_private_key bytea NOT NULL CHECK (octet_length(sealed_private_key) = 61),
    sealed_by   bytea NOT NULL CHECK (octet_length(sealed_by) = 8),
    state       text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'retired')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz,
    PRIMARY KEY (tenant_id, project_id, key_id),
    CHECK ((state = 'active') = (retired_at IS NULL))
);

-- At most one current key per scope, even when two operators rotate at the same moment.
CREATE UNIQUE INDEX ux_outbound_signing_keys_active
    ON wharf.outbound_signing_keys (tenant_id, project_id) WHERE state = 'active';

COMMENT ON TABLE wharf.outbound_signing_keys IS
    'wharf outbound: the server''s sealed Ed25519 signing keys per (tenant, project)';

-- The last producer_sequence emitted per receiver stream. The stream is (tenant, project,
-- destination): a receiver's cursor only moves through contiguous sequences, so a scope that
-- sends to two receivers needs one counter per receiver, or each would see the other's
-- numbers as gaps. A row, not a PostgreSQL sequence, because it must roll back with the
-- emitting transaction: a sequence that advanced for an envelope that never existed would be
-- a gap no receiver can close. bigint, not u64: 2^63 envelopes is out of reach.
CREATE TABLE wharf.outbound_sequences (
    tenant_id       text NOT NULL,
    project_id      text NOT NULL,
    destination_url text NOT NULL CHECK (octet_length(destination_url) BETWEEN 1 AND 2048),
    last_sequence   bigint NOT NULL CHECK (last_sequence >= 1),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, project_id, destination_url)
);

-- Every emitted envelope, exactly as signed, under its idempotency key. A re-emit with the same
-- key and the same request (request_digest) answers this row and nothing else; another request
-- under the key is refused. The action's payload is dropped when delivery ends, so this table,
-- not wharf.action, is what keeps an envelope immutable.
-- action_id is NULL only inside the emitting transaction, between claiming the key and
-- enqueueing the delivery; a failed emit rolls the row back with its savepoint.
CREATE TABLE wharf.outbound_envelopes (
    idempotency_key   text PRIMARY KEY CHECK (octet_length(idempotency_key) BETWEEN 1 AND 256),
    -- SHA-256 over scope, event type, canonical payload and destination.
    request_digest    bytea NOT NULL CHECK (octet_length(request_digest) = 32),
    tenant_id         text NOT NULL,
    project_id        text NOT NULL,
    destination_url   text NOT NULL,
    event_type        text NOT NULL,
    event_id          text NOT NULL UNIQUE CHECK (octet_length(event_id) = 26),
    producer_sequence bigint NOT NULL CHECK (producer_sequence >= 1),
    key_id            text NOT NULL,
    -- The RFC 8785 canonical JSON that was signed and is sent, byte for byte.
    envelope          text NOT NULL,
    action_id         bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, project_id, destination_url, producer_sequence)
);

COMMENT ON TABLE wharf.outbound_envelopes IS
    'wharf outbound: emitted envelopes, immutable under their idempotency keys';

-- Dead letters (FAILED actions) of one (tenant, project), in keyset order (ended_at, id). Only
-- FAILED rows, so the index stays as small as the dead-letter queue itself. Ended rows never
-- change (the outbox's guard trigger), so a key once passed by a cursor never moves.
CREATE INDEX ix_action_dead_letters ON wharf.action (tenant_id, project_id, ended_at, id)
    WHERE state = 'FAILED';
