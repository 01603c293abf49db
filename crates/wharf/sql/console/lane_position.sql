-- Where an action stands in its lane: unstarted actions ahead of it (counted over at most $3
-- rows of ix_action_lane_pending), and the lane's executing action, which holds the lane.
-- $1 lane key, $2 action id, $3 rows counted at most.
SELECT (SELECT count(*) FROM (SELECT 1 FROM wharf.action_live
                               WHERE lane_key = $1 AND state IN ('PROPOSED', 'ADMITTED')
                                 AND id < $2
                               LIMIT $3) ahead) AS ahead,
       h.id AS holder_id, h.epoch AS holder_epoch, h.attempt AS holder_attempt,
       h.lease_expires_at AS holder_lease_expires_at,
       h.write_started_at AS holder_write_started_at
FROM (SELECT 1) one
LEFT JOIN wharf.action_live h ON h.lane_key = $1 AND h.state = 'EXECUTING'
