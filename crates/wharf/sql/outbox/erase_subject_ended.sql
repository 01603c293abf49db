-- Erasure, the ended half (after erase_subject.sql): deletes every ended action of one subject
-- account with its key row.
-- $1 text: subject account id. Returns how many actions were deleted.
WITH gone AS (
    DELETE FROM wharf.action_ended WHERE subject_account_id = $1
    RETURNING id, idempotency_key
),
keys AS (
    DELETE FROM wharf.action_key k
     USING gone g
     WHERE k.idempotency_key = g.idempotency_key AND k.action_id = g.id
)
SELECT count(*) FROM gone
