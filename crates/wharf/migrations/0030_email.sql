-- The email kind's suppression list: addresses that must not receive wharf's notices (an
-- unsubscribe, a complaint, a hard bounce). Every attempt checks it just before the relay is
-- contacted, so a queued retry never reaches someone who opted out meanwhile.
--
-- Owned by `wharf_adapters::email` (its statements are in crates/wharf-adapters/sql/email/);
-- the migration lives here because every wharf table lives in this one schema history.
--
-- Only a SHA-256 of the normalised address is stored, never the address: the list has to
-- outlive the person's erasure (an erased account that is re-created must stay unsubscribed),
-- and a digest lets it do so without keeping personal data that erasure would have to find.

CREATE TABLE wharf.email_suppression (
    address_sha256  bytea       PRIMARY KEY,
    created_at      timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT ck_email_suppression_digest CHECK (octet_length(address_sha256) = 32)
);

COMMENT ON TABLE wharf.email_suppression IS
    'wharf email: SHA-256 of normalised addresses that must receive no notice';
