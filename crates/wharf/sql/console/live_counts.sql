-- Unstarted and executing actions by state and kind, counted over at most $1 rows of the two
-- partial indexes that hold them (ix_action_lane_pending, ux_action_lane_executing), so the
-- cost is bounded however large the backlog; `sampled` says how many rows were read, and a
-- caller that read $1 rows shows the counts as lower bounds.
SELECT state, kind, count(*) AS n
FROM (
    (SELECT state, kind FROM wharf.action_live WHERE state IN ('PROPOSED', 'ADMITTED') LIMIT $1)
    UNION ALL
    (SELECT state, kind FROM wharf.action_live WHERE state = 'EXECUTING' LIMIT $1)
) live
GROUP BY state, kind
ORDER BY state, kind
