-- The action's checks cost less on the hot path: no regular expression, and the columns fixed at
-- enqueue are checked once, at insert, instead of on every update.
--
-- Owned by `wharf::outbox`. Changes 0002_outbox.sql's constraints without editing that file (its
-- checksum is recorded in every database that ran it).
--
-- Why: PostgreSQL evaluates every CHECK constraint of a row on every UPDATE, whichever columns
-- change, and the claim and the completion update every action at least once each. Measured on an
-- UPDATE of 2,000 rows as the claim writes them: the two `~ '^[a-z0-9_.-]{1,64}$'` tests cost
-- about 5 % of the server's time in a drain (a perf profile: textregexeq, pg_regexec), and the six
-- checks of columns that never change after insert about 3.5 µs of a 17 µs row update.
--
-- What is allowed is unchanged:
-- - kind and error_code: 1 to 64 characters, each one of a-z, 0-9, '_', '.' or '-'. All of those
--   are one byte in every server encoding, so a byte length equals the character count whenever
--   ltrim() strips the whole string, and a string with any other character keeps it.
-- - The fixed columns (kind, scope, digest, lane, idempotency key, tenant rule) are checked by a
--   BEFORE INSERT trigger whose WHEN is the negation of the old CHECKs; it raises check_violation
--   (23514) naming the constraint it stands for, as the CHECK did. They cannot change afterwards:
--   the guard (0012, WH004) refuses any UPDATE that changes one of them, so a value checked at insert
--   stays checked. A NULL check passes, as a CHECK's does (a WHEN that is NULL does not fire).
-- - The checks of columns that do change (state, stop reason, end, lease, counters, error code,
--   readback) stay CHECKs.
ALTER TABLE wharf.action DROP CONSTRAINT ck_action_error_code;
ALTER TABLE wharf.action ADD CONSTRAINT ck_action_error_code CHECK (
    error_code IS NULL
    OR (octet_length(error_code) BETWEEN 1 AND 64
        AND ltrim(error_code, 'abcdefghijklmnopqrstuvwxyz0123456789_.-') = ''));

ALTER TABLE wharf.action
    DROP CONSTRAINT ck_action_kind,
    DROP CONSTRAINT ck_action_scope_len,
    DROP CONSTRAINT ck_action_digest,
    DROP CONSTRAINT ck_action_lane_key,
    DROP CONSTRAINT ck_action_idempotency_key,
    DROP CONSTRAINT ck_action_tenant;

-- Runs only for a row one of the checks refuses (the trigger's WHEN); names the first one.
CREATE FUNCTION wharf.action_refuse_fixed_columns() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    failed text;
BEGIN
    failed := CASE
        WHEN NOT coalesce(octet_length(NEW.kind) BETWEEN 1 AND 64
                          AND ltrim(NEW.kind, 'abcdefghijklmnopqrstuvwxyz0123456789_.-') = '',
                          true)
            THEN 'ck_action_kind'
        WHEN NOT coalesce((NEW.tenant_id IS NULL OR octet_length(NEW.tenant_id) BETWEEN 1 AND 256)
                          AND (NEW.project_id IS NULL
                               OR octet_length(NEW.project_id) BETWEEN 1 AND 256)
                          AND (NEW.subject_account_id IS NULL
                               OR octet_length(NEW.subject_account_id) BETWEEN 1 AND 256),
                          true)
            THEN 'ck_action_scope_len'
        WHEN NOT coalesce(octet_length(NEW.content_digest) = 32, true)
            THEN 'ck_action_digest'
        WHEN NOT coalesce(octet_length(NEW.lane_key) BETWEEN 1 AND 256, true)
            THEN 'ck_action_lane_key'
        WHEN NOT coalesce(octet_length(NEW.idempotency_key) BETWEEN 1 AND 256, true)
            THEN 'ck_action_idempotency_key'
        ELSE 'ck_action_tenant'
    END;
    RAISE EXCEPTION 'new row for relation "action" violates check constraint "%"', failed
        USING ERRCODE = 'check_violation', CONSTRAINT = failed, SCHEMA = 'wharf',
              TABLE = 'action';
END
$$;

CREATE TRIGGER action_fixed_columns BEFORE INSERT ON wharf.action
    FOR EACH ROW
    WHEN (NOT (octet_length(NEW.kind) BETWEEN 1 AND 64
               AND ltrim(NEW.kind, 'abcdefghijklmnopqrstuvwxyz0123456789_.-') = ''
               AND (NEW.tenant_id IS NULL OR octet_length(NEW.tenant_id) BETWEEN 1 AND 256)
               AND (NEW.project_id IS NULL OR octet_length(NEW.project_id) BETWEEN 1 AND 256)
               AND (NEW.subject_account_id IS NULL
                    OR octet_length(NEW.subject_account_id) BETWEEN 1 AND 256)
               AND octet_length(NEW.content_digest) = 32
               AND octet_length(NEW.lane_key) BETWEEN 1 AND 256
               AND octet_length(NEW.idempotency_key) BETWEEN 1 AND 256
               AND (NEW.tenant_id IS NOT NULL OR NEW.instance_level)))
    EXECUTE FUNCTION wharf.action_refuse_fixed_columns();
