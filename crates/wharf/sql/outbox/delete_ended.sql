-- Retention: deletes at most $2 actions that ended before $1, oldest first, with their key rows
-- (the key may then be used again). Returns how many actions were deleted.
-- $1 timestamptz: cutoff. $2 integer: batch bound.
WITH gone AS (
    DELETE FROM wharf.action_ended
     WHERE id IN (SELECT id FROM wharf.action_ended
                   WHERE ended_at < $1
                   ORDER BY ended_at, id
                   LIMIT $2)
    RETURNING id, idempotency_key
),
keys AS (
    DELETE FROM wharf.action_key k
     USING gone g
     WHERE k.idempotency_key = g.idempotency_key AND k.action_id = g.id
)
SELECT count(*) FROM gone
