-- UNCERTAIN actions, most recently ended first, strictly before ($2 ended_at, $3 id) (NULL:
-- from the newest): the newest $1 ends at most are read along ix_action_ended, so a page costs
-- at most $1 rows; `scanned_low_*` is where the next page starts when fewer than $4 matched.
WITH w AS (
    SELECT id, kind, tenant_id, project_id, lane_key, idempotency_key, state, stop_reason,
           attempt, max_attempts, epoch, error_code, write_started_at, created_at, ended_at
    FROM wharf.action_ended
    WHERE ended_at IS NOT NULL
      AND ($2::timestamptz IS NULL OR (ended_at, id) < ($2::timestamptz, $3::bigint))
    ORDER BY ended_at DESC, id DESC
    LIMIT $1
), low AS (
    SELECT count(*) AS scanned,
           (SELECT ended_at FROM w ORDER BY ended_at, id LIMIT 1) AS scanned_low_ended_at,
           (SELECT id FROM w ORDER BY ended_at, id LIMIT 1) AS scanned_low_id
    FROM w
)
SELECT low.scanned, low.scanned_low_ended_at, low.scanned_low_id, m.*
FROM low
LEFT JOIN LATERAL (
    SELECT * FROM w WHERE state = 'UNCERTAIN' ORDER BY ended_at DESC, id DESC LIMIT $4
) m ON true
ORDER BY m.ended_at DESC, m.id DESC
