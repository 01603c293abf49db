SELECT count(*) FROM (
    SELECT lane_key FROM wharf.action_live WHERE state = 'EXECUTING'
     GROUP BY lane_key HAVING count(*) > 1) twice
