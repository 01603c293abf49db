-- Dead letters of the `envelope` kind that can be delivered again, in one explicit scope, in
-- the order they were emitted, each with the immutable envelope it carried. A dead letter that
-- was redriven (or resent) already is left out, so a second run finds only what the first did
-- not reach. Locks the actions it returns until the caller's transaction ends, so two
-- concurrent redrives cannot both pick one (the resend key would make the second a no-op
-- anyway).
-- $1 tenant, $2 project, $3 error code (NULL: any), $4 ended after (NULL: any time),
-- $5 rows (<= 100).
SELECT a.id, a.lane_key, a.max_attempts, a.error_code, e.destination_url, e.envelope, e.event_id
  FROM wharf.action_ended a
  JOIN wharf.outbound_envelopes e ON e.action_id = a.id
 WHERE a.state = 'FAILED' AND a.kind = 'envelope' AND a.tenant_id = $1 AND a.project_id = $2
   AND ($3::text IS NULL OR a.error_code = $3)
   AND ($4::timestamptz IS NULL OR a.ended_at > $4)
   AND NOT EXISTS (SELECT 1 FROM wharf.action_resend r WHERE r.resends_id = a.id)
 ORDER BY a.id
 LIMIT $5
   FOR UPDATE OF a
