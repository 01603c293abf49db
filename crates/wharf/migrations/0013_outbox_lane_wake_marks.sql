-- A lane's next action is promoted only when something in the lane was demoted.
--
-- Owned by `wharf::outbox`. Changes 0011_outbox_busy_lane_hints.sql's promotion triggers without
-- editing that file (its checksum is recorded in every database that ran it).
--
-- Why: since 0011 every action that leaves EXECUTING (every completion) called
-- wharf.action_promote_next(): a PL/pgSQL call, an index probe for the lane's next unstarted
-- action and an UPDATE attempt, per completed row. In the common case, a lane with nothing
-- waiting or whose next action was never demoted, all of it finds nothing to do. Only a demotion
-- (demote.sql) creates the need for a promotion, so a demotion now leaves a mark on the row whose
-- departure will have to promote: `wakes_lane` on the row that blocks the demoted one (the lane's
-- earlier unstarted action, or its EXECUTING action). The triggers fire only for marked rows, and
-- for rows leaving PROPOSED (a PROPOSED row cannot be marked: the guard refuses PROPOSED ->
-- PROPOSED, so demote.sql only share-locks it, and admit.sql marks it as it leaves PROPOSED).
--
-- The invariant, for every lane: if any of its unstarted actions is demoted (head_hint false),
-- an earlier live action of the lane carries the mark (or is PROPOSED). Each step keeps it:
-- - a demotion marks the demoted row's blocker in the same statement, under the lock that
--   orders the blocker's departure after it (demote.sql);
-- - a marked row that leaves (ended, released back to ADMITTED, deleted) promotes its lane's
--   first unstarted action and passes the mark on to it, so rows further back that the mark
--   stood for keep a marked row before them (action_promote_next below);
-- - a claim keeps the row live and marked; admit.sql marks a row as it leaves PROPOSED;
-- - enqueue adds hinted rows, which need no mark.
-- A mark left behind costs one promotion attempt when its row leaves, never a wrong claim: the
-- claim checks lane order and exclusivity exactly, as before.
--
-- Existing demoted rows have no marked blocker: they get their hint back here, and the next
-- short claims demote them again, with marks.
ALTER TABLE wharf.action ADD COLUMN wakes_lane boolean NOT NULL DEFAULT false;

UPDATE wharf.action SET head_hint = true WHERE state = 'ADMITTED' AND NOT head_hint;

CREATE OR REPLACE FUNCTION wharf.action_promote_next() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    next_id bigint;
BEGIN
    -- Under READ COMMITTED one UPDATE in a fresh snapshot; under the stricter levels the row is
    -- locked first, so a demotion after the caller's snapshot fails with 40001 (0011).
    IF current_setting('transaction_isolation') IN ('read committed', 'read uncommitted') THEN
        UPDATE wharf.action
           SET head_hint = true, wakes_lane = true
         WHERE id = (SELECT n.id FROM wharf.action n
                      WHERE n.lane_key = OLD.lane_key AND n.state IN ('PROPOSED', 'ADMITTED')
                      ORDER BY n.id LIMIT 1)
           AND state = 'ADMITTED' AND NOT (head_hint AND wakes_lane);
    ELSE
        SELECT n.id INTO next_id
          FROM wharf.action n
         WHERE n.lane_key = OLD.lane_key AND n.state IN ('PROPOSED', 'ADMITTED')
         ORDER BY n.id LIMIT 1;
        IF next_id IS NOT NULL THEN
            PERFORM 1 FROM wharf.action WHERE id = next_id FOR NO KEY UPDATE;
            UPDATE wharf.action
               SET head_hint = true, wakes_lane = true
             WHERE id = next_id AND state = 'ADMITTED' AND NOT (head_hint AND wakes_lane);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER action_promote_after_update ON wharf.action;
DROP TRIGGER action_promote_after_delete ON wharf.action;

-- The same events as 0011, for marked rows and rows leaving PROPOSED only.
CREATE TRIGGER action_promote_after_update AFTER UPDATE OF state ON wharf.action
    FOR EACH ROW
    WHEN ((OLD.wakes_lane OR OLD.state = 'PROPOSED')
          AND (NEW.state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')
               OR (OLD.state = 'EXECUTING' AND NEW.state = 'ADMITTED')))
    EXECUTE FUNCTION wharf.action_promote_next();

CREATE TRIGGER action_promote_after_delete AFTER DELETE ON wharf.action
    FOR EACH ROW
    WHEN ((OLD.wakes_lane OR OLD.state = 'PROPOSED')
          AND OLD.state IN ('PROPOSED', 'ADMITTED', 'EXECUTING'))
    EXECUTE FUNCTION wharf.action_promote_next();
