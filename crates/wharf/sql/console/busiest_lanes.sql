-- A page of the busiest lanes among the first $1 unstarted actions in lane order (a bounded
-- sample read along ix_action_lane_pending (lane_key, id); its counts are lower bounds when $1
-- rows were read), or of lane $3 only. Read in index order so that every page of one listing
-- reads the same sample: the keyset cursor ($7 depth, $8 lane key: the last row of the previous
-- page) then continues where the previous page stopped, in (depth DESC, lane_key) order, at most
-- $2 lanes a page. $5 kind and $6 tenant keep the lanes with an unstarted action of that kind or
-- tenant in the sample (a filter over the sample, never a longer scan). Each lane with its head
-- (first unstarted action) and its holder (its executing action): two index probes a lane.
-- $4 timestamptz "now" for tests (NULL: the database clock).
WITH sample AS (
    SELECT lane_key, kind, tenant_id FROM wharf.action_live
    WHERE state IN ('PROPOSED', 'ADMITTED') AND ($3::text IS NULL OR lane_key = $3)
    ORDER BY lane_key, id
    LIMIT $1
), lanes AS (
    SELECT lane_key, count(*) AS depth FROM sample
    GROUP BY lane_key
    HAVING bool_or(($5::text IS NULL OR kind = $5) AND ($6::text IS NULL OR tenant_id = $6))
       AND ($7::bigint IS NULL OR count(*) < $7 OR (count(*) = $7 AND lane_key > $8::text))
    ORDER BY depth DESC, lane_key LIMIT $2
)
SELECT l.lane_key, l.depth,
       hd.id AS head_id, hd.kind AS head_kind, hd.state AS head_state, hd.run_at AS head_run_at,
       h.id AS holder_id, h.epoch AS holder_epoch, h.lease_expires_at AS holder_lease_expires_at,
       h.write_started_at AS holder_write_started_at,
       coalesce($4::timestamptz, now()) AS now
FROM lanes l
JOIN LATERAL (SELECT id, kind, state, run_at FROM wharf.action_live
              WHERE lane_key = l.lane_key AND state IN ('PROPOSED', 'ADMITTED')
              ORDER BY id LIMIT 1) hd ON true
LEFT JOIN wharf.action_live h ON h.lane_key = l.lane_key AND h.state = 'EXECUTING'
ORDER BY l.depth DESC, l.lane_key
