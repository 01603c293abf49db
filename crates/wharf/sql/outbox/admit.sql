-- Admits a proposal: PROPOSED -> ADMITTED. Zero rows when the action is not PROPOSED.
-- The row is marked as it leaves PROPOSED: a demotion behind a PROPOSED row cannot mark it (the
-- guard refuses PROPOSED -> PROPOSED), so its departure must still promote the lane
-- (0013_outbox_lane_wake_marks.sql).
-- $1: action id.
UPDATE wharf.action_live
   SET state = 'ADMITTED', wakes_lane = true
 WHERE id = $1 AND state = 'PROPOSED'
RETURNING id
