-- Deletes up to $1 expired sessions, oldest first (run at every sign-in, so the table stays
-- as small as the number of live sessions plus one batch).
DELETE FROM wharf.console_sessions
WHERE session_sha256 IN (SELECT session_sha256 FROM wharf.console_sessions
                         WHERE expires_at <= now() ORDER BY expires_at LIMIT $1)
