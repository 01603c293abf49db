-- Ends at-most-once actions whose lease expired after their write started: nobody can tell
-- whether the provider holds the effect, and claiming them again could send it twice.
-- EXECUTING -> UNCERTAIN / LEASE_LOST_AFTER_WRITE, at most $1 per statement.
-- $1 integer: batch bound. $2 timestamptz: "now" for tests; NULL means the database clock.
WITH clock AS MATERIALIZED (
    SELECT coalesce($2::timestamptz, now()) AS now
),
lost AS (
    SELECT a.id
      FROM wharf.action a, clock
     WHERE a.state = 'EXECUTING' AND a.lease_expires_at <= clock.now
       AND a.at_most_once AND a.write_started_at IS NOT NULL
     ORDER BY a.lease_expires_at
     LIMIT $1
       FOR UPDATE OF a SKIP LOCKED
)
UPDATE wharf.action a
   SET state = 'UNCERTAIN', stop_reason = 'LEASE_LOST_AFTER_WRITE', payload = NULL,
       ended_at = clock.now, lease_expires_at = NULL, error_code = 'lease_lost_after_write'
  FROM lost, clock
 WHERE a.id = lost.id AND a.state = 'EXECUTING'
RETURNING a.id, a.kind
