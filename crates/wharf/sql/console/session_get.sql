-- The live session a token's hash names; none once it expired (by the database clock).
-- $1 SHA-256 of the session token.
SELECT operator::text, role, created_at, expires_at
FROM wharf.console_sessions
WHERE session_sha256 = $1 AND expires_at > now()
