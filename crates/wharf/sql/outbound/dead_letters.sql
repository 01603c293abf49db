-- One page of dead letters (FAILED actions) of one (tenant, project), in (ended_at, id) order,
-- strictly after the cursor. Served by ix_action_dead_letters: equality on the scope, then a
-- range on the row comparison. Only stable columns: never the payload (gone anyway once an
-- action ends) nor anything a provider said beyond its error code.
-- $1 tenant, $2 project, $3 cursor's ended_at (NULL: from the start), $4 cursor's id,
-- $5 rows to return.
SELECT id, kind, lane_key, idempotency_key, stop_reason, error_code, attempt, ended_at
  FROM wharf.action_ended
 WHERE state = 'FAILED' AND tenant_id = $1 AND project_id = $2
   AND (ended_at, id) > (coalesce($3::timestamptz, '-infinity'::timestamptz), coalesce($4::bigint, 0))
 ORDER BY ended_at, id
 LIMIT $5
