-- One page of the actions list, newest first: the $1 rows (at most) of the primary key below
-- id $2 (NULL: from the newest) are read, and those matching the filters are returned, at most
-- $3. `scanned` and `scanned_low` say how far the read went, so the next page starts below it
-- even when nothing matched: a page costs at most $1 rows whatever the filters and the table.
-- Filters (NULL: any): $4 state, $5 kind, $6 tenant, $7 lane.
WITH w AS (
    SELECT id, kind, tenant_id, project_id, lane_key, idempotency_key, state, stop_reason,
           attempt, max_attempts, epoch, error_code, run_at, created_at, ended_at
    FROM wharf.action
    WHERE id < coalesce($2::bigint, 9223372036854775807)
    ORDER BY id DESC
    LIMIT $1
)
SELECT s.scanned, s.scanned_low, m.*
FROM (SELECT count(*) AS scanned, min(id) AS scanned_low FROM w) s
LEFT JOIN LATERAL (
    SELECT * FROM w
    WHERE ($4::text IS NULL OR state = $4)
      AND ($5::text IS NULL OR kind = $5)
      AND ($6::text IS NULL OR tenant_id = $6)
      AND ($7::text IS NULL OR lane_key = $7)
    ORDER BY id DESC
    LIMIT $3
) m ON true
ORDER BY m.id DESC
