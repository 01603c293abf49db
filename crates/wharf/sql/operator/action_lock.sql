-- Locks one action for an operator action and says what it is now. The lock holds until the
-- operator's transaction ends, so the state read here is the state the change is decided on:
-- a claim skips the row meanwhile (SKIP LOCKED), and retention and erasure wait. The action is
-- live or ended (0060); one that ends while this statement waits for its live row is found
-- only by a later snapshot, so the caller asks again when no row comes back.
-- $1: action id.
WITH live AS (
    SELECT id, kind, state, tenant_id, project_id, lane_key, subject_account_id
      FROM wharf.action_live
     WHERE id = $1
       FOR UPDATE
),
ended AS (
    SELECT id, kind, state, tenant_id, project_id, lane_key, subject_account_id
      FROM wharf.action_ended
     WHERE id = $1
       FOR UPDATE
)
SELECT * FROM live
UNION ALL
SELECT * FROM ended
