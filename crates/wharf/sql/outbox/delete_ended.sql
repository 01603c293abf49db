-- Retention: deletes at most $2 actions that ended before $1, oldest first.
-- $1 timestamptz: cutoff. $2 integer: batch bound.
DELETE FROM wharf.action
 WHERE id IN (SELECT id FROM wharf.action
               WHERE ended_at IS NOT NULL AND ended_at < $1
               ORDER BY ended_at
               LIMIT $2)
