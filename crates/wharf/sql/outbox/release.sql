-- Gives claimed actions back without an attempt, before this attempt's write: EXECUTING ->
-- ADMITTED, due now, attempt not counted. Used when a claim returned more actions of a kind than
-- its concurrency or its claim budget allows. Fenced by (id, epoch).
-- write_started_at is not a condition: the caller never ran these, so a mark there is from an
-- earlier attempt and is kept (the next attempt reads back). Requiring it NULL left a reclaimed
-- row with that mark EXECUTING under a fresh lease, never run. At-most-once rows whose write
-- started are never claimed, so they cannot reach here.
-- $1 bigint[] id, $2 bigint[] epoch.
UPDATE wharf.action a
   SET state = 'ADMITTED', attempt = a.attempt - 1, lease_expires_at = NULL,
       run_at = now(), head_hint = true
  FROM unnest($1::bigint[], $2::bigint[]) AS r(id, epoch)
 WHERE a.id = r.id AND a.epoch = r.epoch AND a.state = 'EXECUTING'
RETURNING a.id
