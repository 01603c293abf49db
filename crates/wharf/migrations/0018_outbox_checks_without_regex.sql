-- The action's two pattern CHECKs say the same thing without a regular expression.
--
-- Owned by `wharf::outbox`. Changes 0002_outbox.sql's constraints without editing that file (its
-- checksum is recorded in every database that ran it).
--
-- Why: PostgreSQL evaluates every CHECK constraint of a row on every UPDATE, whichever columns
-- change, and the claim and the completion update every action at least once each. The two
-- `~ '^[a-z0-9_.-]{1,64}$'` tests cost about 5 % of the server's time in a drain (a perf profile:
-- textregexeq, RE_compile_and_execute, pg_regexec), for a kind that never changes after insert
-- and an error code that is mostly NULL.
--
-- What they allow is unchanged: 1 to 64 characters, each one of a-z, 0-9, '_', '.' or '-'. All
-- of those are one byte in every server encoding, so a byte length equals the character count
-- whenever ltrim() strips the whole string, and a string with any other character keeps it.
ALTER TABLE wharf.action DROP CONSTRAINT ck_action_kind;
ALTER TABLE wharf.action ADD CONSTRAINT ck_action_kind CHECK (
    octet_length(kind) BETWEEN 1 AND 64
    AND ltrim(kind, 'abcdefghijklmnopqrstuvwxyz0123456789_.-') = '');

ALTER TABLE wharf.action DROP CONSTRAINT ck_action_error_code;
ALTER TABLE wharf.action ADD CONSTRAINT ck_action_error_code CHECK (
    error_code IS NULL
    OR (octet_length(error_code) BETWEEN 1 AND 64
        AND ltrim(error_code, 'abcdefghijklmnopqrstuvwxyz0123456789_.-') = ''));
