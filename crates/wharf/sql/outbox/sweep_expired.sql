-- Ends unstarted actions whose expires_at passed: PROPOSED/ADMITTED -> CANCELLED / EXPIRED,
-- at most $1 per statement.
-- $1 integer: batch bound. $2 timestamptz: "now" for tests; NULL means the database clock.
WITH clock AS MATERIALIZED (
    SELECT coalesce($2::timestamptz, now()) AS now
),
expired AS (
    SELECT a.id
      FROM wharf.action a, clock
     WHERE a.state IN ('PROPOSED', 'ADMITTED') AND a.expires_at IS NOT NULL
       AND a.expires_at <= clock.now
     ORDER BY a.expires_at
     LIMIT $1
       FOR UPDATE OF a SKIP LOCKED
)
UPDATE wharf.action a
   SET state = 'CANCELLED', stop_reason = 'EXPIRED', payload = NULL, ended_at = clock.now
  FROM expired, clock
 WHERE a.id = expired.id AND a.state IN ('PROPOSED', 'ADMITTED')
RETURNING a.id, a.kind
