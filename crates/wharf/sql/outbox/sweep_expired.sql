-- Ends unstarted actions whose expires_at passed: PROPOSED/ADMITTED -> CANCELLED / EXPIRED,
-- at most $1 per statement. "Unstarted" includes the write: an ADMITTED action whose earlier
-- attempt passed its fence (write_started_at set, e.g. a reclaim that then deferred) may
-- already be held by the provider, so it is not expired; it is claimed again and reads back.
-- $1 integer: batch bound. $2 timestamptz: "now" for tests; NULL means the database clock.
WITH clock AS MATERIALIZED (
    SELECT coalesce($2::timestamptz, now()) AS now
),
expired AS (
    SELECT a.id
      FROM wharf.action a, clock
     WHERE a.state IN ('PROPOSED', 'ADMITTED') AND a.expires_at IS NOT NULL
       AND a.expires_at <= clock.now AND a.write_started_at IS NULL
     ORDER BY a.expires_at
     LIMIT $1
       FOR UPDATE OF a SKIP LOCKED
)
UPDATE wharf.action a
   SET state = 'CANCELLED', stop_reason = 'EXPIRED', payload = NULL, ended_at = clock.now
  FROM expired, clock
 WHERE a.id = expired.id AND a.state IN ('PROPOSED', 'ADMITTED') AND a.write_started_at IS NULL
RETURNING a.id, a.kind
