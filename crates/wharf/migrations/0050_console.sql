-- The operator console (wharf-http's `console` module): sign-in sessions and the operator
-- audit trail.
--
-- Owned by `wharf::console`. Neither table is read by the outbox or the inbox: the console is a
-- client of the library like the CLI, and dropping these tables loses only sessions and the
-- record of what operators did in the console.

-- One row per signed-in browser. The session token itself is never stored: only SHA-256 of its
-- 32 random bytes, so a copy of this table cannot sign anybody in. A session ends at
-- `expires_at` (a bounded lifetime, decided at sign-in) or when its operator signs out.
CREATE TABLE wharf.console_sessions (
    session_sha256 bytea PRIMARY KEY CHECK (octet_length(session_sha256) = 32),
    -- Who signed in, as they named themselves at sign-in (the token says which role, not who).
    operator       wharf.inbox_identity NOT NULL,
    role           text NOT NULL CHECK (role IN ('operator', 'read-only')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);
-- Sign-in deletes expired sessions oldest first, in bounded batches.
CREATE INDEX console_sessions_expiry ON wharf.console_sessions (expires_at);

-- Every operator action taken in the console, sign-in and sign-out included: who, which role,
-- what, on what, with what result, when, and the request's correlation id. Beside
-- wharf.operator_audit (0015), which records the outbox operator actions of the admin API and
-- CLI (cancel, resolve, redrive); one trail for both is left for later. Append-only (the inbox's trigger function
-- refuses UPDATE, DELETE and TRUNCATE). Never a token, a payload or a key.
CREATE TABLE wharf.console_audit (
    audit_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operator       wharf.inbox_identity NOT NULL,
    role           text NOT NULL CHECK (role IN ('operator', 'read-only')),
    -- e.g. sign-in, sign-out, action-admit, action-refuse, subject-erase, stream-skip,
    -- stream-advance-floor.
    action         text NOT NULL CHECK (action ~ '^[a-z][a-z-]{0,63}$'),
    target         text NOT NULL CHECK (octet_length(target) <= 512),
    detail         text NOT NULL CHECK (octet_length(detail) <= 512),
    correlation_id text NOT NULL CHECK (octet_length(correlation_id) <= 128),
    recorded_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TRIGGER console_audit_append_only
    BEFORE UPDATE OR DELETE ON wharf.console_audit
    FOR EACH ROW EXECUTE FUNCTION wharf.inbox_refuse_change();
CREATE TRIGGER console_audit_no_truncate
    BEFORE TRUNCATE ON wharf.console_audit
    FOR EACH STATEMENT EXECUTE FUNCTION wharf.inbox_refuse_change();
