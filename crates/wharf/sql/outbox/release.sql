-- Gives claimed actions back without an attempt, before this attempt's write: EXECUTING ->
-- ADMITTED, due now, attempt not counted. Used when a claim returned more actions of a kind than
-- its concurrency or its claim budget allows, for held actions on shutdown or after waiting too
-- long for a slot, and when an attempt's fence could not reach the database (the adapter did not
-- call its provider; the action runs again now instead of after its lease). Fenced by (id, epoch).
-- write_started_at is not a condition: a mark there from an earlier attempt is kept (the next
-- attempt reads back). Requiring it NULL left a reclaimed row with that mark EXECUTING under a
-- fresh lease, never run. A mark that only this claim made ($3: the claim was the fence, or a
-- fence whose answer was lost) is cleared, because this attempt wrote nothing. At-most-once rows
-- whose write started before this claim are never claimed, so they cannot reach here.
-- $1 bigint[] id, $2 bigint[] epoch, $3 boolean[] clear write_started_at.
UPDATE wharf.action_live a
   SET state = 'ADMITTED', attempt = a.attempt - 1, lease_expires_at = NULL,
       run_at = now(), head_hint = true,
       write_started_at = CASE WHEN r.clear_fence THEN NULL ELSE a.write_started_at END
  FROM unnest($1::bigint[], $2::bigint[], $3::boolean[]) AS r(id, epoch, clear_fence)
 WHERE a.id = ANY($1::bigint[]) AND a.id = r.id AND a.epoch = r.epoch
   AND CASE WHEN a.state = 'EXECUTING' THEN true ELSE false END  -- the plan: see complete.sql
RETURNING a.id
