-- The busiest lanes among the first $1 unstarted actions of ix_action_lane_pending (a bounded
-- sample: the count is a lower bound when $1 rows were read), at most $2 of them, or only lane
-- $3. Each with its head (first unstarted action) and its holder (its executing action).
WITH sample AS (
    SELECT lane_key, id FROM wharf.action
    WHERE state IN ('PROPOSED', 'ADMITTED') AND ($3::text IS NULL OR lane_key = $3)
    LIMIT $1
), lanes AS (
    SELECT lane_key, count(*) AS depth FROM sample GROUP BY lane_key
    ORDER BY depth DESC, lane_key LIMIT $2
)
SELECT l.lane_key, l.depth,
       hd.id AS head_id, hd.kind AS head_kind, hd.state AS head_state, hd.run_at AS head_run_at,
       h.id AS holder_id, h.epoch AS holder_epoch, h.lease_expires_at AS holder_lease_expires_at,
       h.write_started_at AS holder_write_started_at,
       coalesce($4::timestamptz, now()) AS now
FROM lanes l
JOIN LATERAL (SELECT id, kind, state, run_at FROM wharf.action
              WHERE lane_key = l.lane_key AND state IN ('PROPOSED', 'ADMITTED')
              ORDER BY id LIMIT 1) hd ON true
LEFT JOIN wharf.action h ON h.lane_key = l.lane_key AND h.state = 'EXECUTING'
ORDER BY l.depth DESC, l.lane_key
