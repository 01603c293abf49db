-- Locks one action for an operator action and says what it is now. The lock holds until the
-- operator's transaction ends, so the state read here is the state the change is decided on:
-- a claim skips the row meanwhile (SKIP LOCKED), and retention and erasure wait.
-- $1: action id.
SELECT id, kind, state, tenant_id, project_id, lane_key, subject_account_id
  FROM wharf.action
 WHERE id = $1
   FOR UPDATE
