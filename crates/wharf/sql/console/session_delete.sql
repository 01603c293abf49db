-- Ends a session (sign-out). $1 SHA-256 of the session token.
DELETE FROM wharf.console_sessions WHERE session_sha256 = $1
