-- Removing a revoked verification key (issue 13, SPEC §3.7): the key row goes, only when none of
-- the envelopes it signed can be replayed, and the removal is audited.
--
-- Owned by `wharf::inbox::keys`. Identities keep their key_id (they are permanent and name the
-- key that accepted them, removed or not); the audit names the removed key in its own column.
ALTER TABLE wharf.inbox_audit ADD COLUMN key_id text CHECK (octet_length(key_id) BETWEEN 1 AND 128);
ALTER TABLE wharf.inbox_audit DROP CONSTRAINT inbox_audit_action_check;
ALTER TABLE wharf.inbox_audit ADD CONSTRAINT inbox_audit_action_check
    CHECK (action IN ('ingest', 'stream-skip', 'stream-advance-floor', 'key-remove'));
ALTER TABLE wharf.inbox_audit ADD CONSTRAINT inbox_audit_key_named
    CHECK ((key_id IS NOT NULL) = (action = 'key-remove'));
