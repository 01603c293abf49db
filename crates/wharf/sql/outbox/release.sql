-- Gives claimed actions back without an attempt, before any write: EXECUTING -> ADMITTED, due
-- now, attempt not counted. Used when a claim returned more actions of a kind than its
-- concurrency or its claim budget allows. Fenced by (id, epoch) and by an unstarted write.
-- $1 bigint[] id, $2 bigint[] epoch.
UPDATE wharf.action a
   SET state = 'ADMITTED', attempt = a.attempt - 1, lease_expires_at = NULL,
       run_at = now(), head_hint = true
  FROM unnest($1::bigint[], $2::bigint[]) AS r(id, epoch)
 WHERE a.id = r.id AND a.epoch = r.epoch AND a.state = 'EXECUTING' AND a.write_started_at IS NULL
RETURNING a.id
