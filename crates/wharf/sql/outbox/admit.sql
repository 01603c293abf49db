-- Admits a proposal: PROPOSED -> ADMITTED. Zero rows when the action is not PROPOSED.
-- $1: action id.
UPDATE wharf.action
   SET state = 'ADMITTED'
 WHERE id = $1 AND state = 'PROPOSED'
RETURNING id
