-- An accepted envelope costs less to write (issue 19): no regular expression and no foreign-key
-- trigger on the rows every ingest inserts.
--
-- Owned by `wharf::inbox`. Changes 0003_inbox.sql's constraints without editing that file (its
-- checksum is recorded in every database that ran it).
--
-- Why: a perf profile of the batch endpoint (8 streams, batches of 100, 14.8 k envelopes/s)
-- put 38 % of the machine in PostgreSQL, and of that about 11 % in `textregexeq` (the audit
-- row's `~ '^[0-9a-f]{64}$'`: a bounded repetition compiles to a large automaton, 7.6 µs a row
-- against 1.7 µs for the check below, measured over 200,000 rows) and about 14 % in
-- `AfterTriggerEndQuery`, the two foreign keys checked once per inserted row, each by a query
-- that locks the referenced row. Measured A-B on one server, both changes: 16.5 k against
-- 15.0 k envelopes/s (BENCHMARKS.md).
--
-- What is allowed is unchanged:
-- - event_id_sha256: NULL, or exactly 64 characters, each one of 0-9 and a-f. All of those are
--   one byte in every server encoding, so the byte length is the character count whenever
--   ltrim() strips the whole string, and a string with any other character keeps it.
-- - An identity's stream always exists: identities are only inserted by the group commit and
--   wharf.inbox_store_presumed, both under the stream row's FOR UPDATE lock taken in the same
--   transaction, and stream rows can no longer be deleted or truncated (the triggers below; the
--   foreign key refused that before, and nothing in wharf ever deleted one).
-- - A payload's identity always exists: payloads are only inserted by the same two writers, in
--   the statement that inserts their identity with the id drawn for it, and identities are
--   append-only (0003: no UPDATE, DELETE or TRUNCATE).
ALTER TABLE wharf.inbox_audit DROP CONSTRAINT inbox_audit_event_id_sha256_check;
ALTER TABLE wharf.inbox_audit ADD CONSTRAINT inbox_audit_event_id_sha256_check CHECK (
    octet_length(event_id_sha256) = 64 AND ltrim(event_id_sha256, '0123456789abcdef') = '');

ALTER TABLE wharf.inbox_identities DROP CONSTRAINT inbox_identities_stream_id_fkey;
ALTER TABLE wharf.inbox_payloads DROP CONSTRAINT inbox_payloads_identity_id_fkey;

-- Streams are updated (cursor, floor) and never removed: an identity names its stream forever.
CREATE FUNCTION wharf.inbox_refuse_stream_removal() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'wharf.% rows are never removed: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER inbox_streams_no_delete
    BEFORE DELETE ON wharf.inbox_streams
    FOR EACH ROW EXECUTE FUNCTION wharf.inbox_refuse_stream_removal();
CREATE TRIGGER inbox_streams_no_truncate
    BEFORE TRUNCATE ON wharf.inbox_streams
    FOR EACH STATEMENT EXECUTE FUNCTION wharf.inbox_refuse_stream_removal();
