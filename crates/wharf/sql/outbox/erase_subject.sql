-- Erasure: deletes every action of one subject account, in any state. A pending one is then
-- never run; a claimed one's fence and completion find no row.
-- $1 text: subject account id.
DELETE FROM wharf.action WHERE subject_account_id = $1
