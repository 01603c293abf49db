-- A new console session. $1 SHA-256 of the session token, $2 operator, $3 role,
-- $4 lifetime in milliseconds (the database clock decides when it ends).
INSERT INTO wharf.console_sessions (session_sha256, operator, role, expires_at)
VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')
RETURNING operator::text, role, created_at, expires_at
