-- Erasure, the live half: deletes every live action of one subject account, in any state, with
-- its key row (an erased action's key may be used again, as before the key had a table of its
-- own). A pending one is then never run; a claimed one's fence and completion find no row.
-- erase_subject_ended.sql runs next, in a statement of its own: an action that a completion
-- moved to wharf.action_ended while this statement waited for its row is visible only to a
-- later snapshot (under READ COMMITTED; a stricter level fails here with 40001 instead).
-- $1 text: subject account id. Returns how many actions were deleted.
WITH gone AS (
    DELETE FROM wharf.action_live WHERE subject_account_id = $1
    RETURNING id, idempotency_key
),
keys AS (
    DELETE FROM wharf.action_key k
     USING gone g
     WHERE k.idempotency_key = g.idempotency_key AND k.action_id = g.id
)
SELECT count(*) FROM gone
