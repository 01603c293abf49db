-- Busy lanes give up their claim hint (SPEC §2.3), so idle lanes are never starved.
--
-- Owned by `wharf::outbox`. Changes 0002_outbox.sql's hint upkeep without editing that file
-- (its checksum is recorded in every database that ran it).
--
-- The gap this closes: a claim looks at a bounded window of hinted due rows (claim.sql, $5,
-- default 1000) and keeps those whose lane is free. Demotion (demote.sql) took the hint off rows
-- behind an earlier unstarted row, but nothing took it off rows whose lane has an EXECUTING
-- action. With more than a window of lanes each running one slow action and holding its next
-- one due, every claim's window was full of them, and due heads of idle lanes later in run_at
-- order waited until the slow actions ended. demote.sql now takes the hint off those rows too,
-- and this migration moves the promotion to match: a lane's first unstarted action gets the hint
-- back when the lane's EXECUTING action leaves EXECUTING (completed or released back to
-- ADMITTED, ended by a completion or the lease sweep, or deleted by erasure), and no longer when
-- an action is claimed. Promoting at the claim put the hint on a row of a lane that had just
-- become busy, for the next short claim's demotion to take off again: two more row versions per
-- action of a backlogged lane, for nothing. Now a backlogged lane costs what it did before this
-- file: one demotion and one promotion per action.
--
-- The invariant, for every lane: its first unstarted action carries the hint, or the lane has an
-- EXECUTING action (whose departure fires the promotion). Each step keeps it:
-- - enqueue hints every new row (the column default); PROPOSED rows are never demoted;
-- - a claim makes the lane busy, so the lane needs no hint until that action leaves;
-- - an action that leaves the unstarted states other than by a claim (refusal, expiry, erasure)
--   or that leaves EXECUTING re-hints the lane's first unstarted action, in a fresh snapshot
--   taken after its own change (the triggers below), and a completion or release back to
--   ADMITTED also sets the row's own hint (complete.sql, release.sql);
-- - a demotion commits only while it holds a share lock on the row that blocks the demoted one,
--   in the state it blocks in, so that row's departure is ordered after the demotion and its
--   trigger sees it (the case analysis is in demote.sql).
-- A wrong hint still costs only a probe: the claim checks lane order and exclusivity exactly.
--
-- Rolling upgrades: a replica running the previous demote.sql demotes only rows behind an
-- earlier unstarted row, never a lane's first unstarted row, so it is safe beside these
-- triggers; the new demote.sql needs them, and `wharf::migrate::run` applies this file before a
-- new replica claims anything. sqlx applies it on databases that already ran later migrations
-- too (it applies every missing version, in order).
--
-- The trigger function is replaced for one more reason, found while checking the race above:
-- its "fresh snapshot" holds only under READ COMMITTED. Erasure and refusal run in the caller's
-- transaction (SPEC §2.1, STYLE 3); under REPEATABLE READ or SERIALIZABLE the trigger saw a
-- demotion that committed after the caller's snapshot as still hinted, and left the lane's next
-- row without a hint and nothing left to promote it. There the function now locks the row it
-- looked at: if a demotion changed it after the snapshot, the lock fails with a serialization
-- error (SQLSTATE 40001, which such callers retry) instead of stranding it. Under READ
-- COMMITTED (wharf's own statements, at PostgreSQL's default isolation) it is the same single
-- UPDATE as before, with no extra lock. Left as it is under the stricter levels: a row the
-- caller's snapshot cannot see at all (enqueued into the lane with a lower id than the row looked
-- at, committed after that snapshot, and demoted before the caller's change) keeps no hint; it
-- takes an enqueue, a demotion and the caller's erasure or refusal of that very lane
-- interleaving within one transaction of the caller.
CREATE OR REPLACE FUNCTION wharf.action_promote_next() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    next_id bigint;
BEGIN
    IF current_setting('transaction_isolation') IN ('read committed', 'read uncommitted') THEN
        UPDATE wharf.action
           SET head_hint = true
         WHERE id = (SELECT n.id FROM wharf.action n
                      WHERE n.lane_key = OLD.lane_key AND n.state IN ('PROPOSED', 'ADMITTED')
                      ORDER BY n.id LIMIT 1)
           AND state = 'ADMITTED' AND NOT head_hint;
    ELSE
        SELECT n.id INTO next_id
          FROM wharf.action n
         WHERE n.lane_key = OLD.lane_key AND n.state IN ('PROPOSED', 'ADMITTED')
         ORDER BY n.id LIMIT 1;
        IF next_id IS NOT NULL THEN
            -- Raises 40001 when the row changed after this transaction's snapshot.
            PERFORM 1 FROM wharf.action WHERE id = next_id FOR NO KEY UPDATE;
            UPDATE wharf.action
               SET head_hint = true
             WHERE id = next_id AND state = 'ADMITTED' AND NOT head_hint;
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- 0002's two triggers, replaced with the events above. The update trigger fires on
-- PROPOSED/ADMITTED -> CANCELLED, EXECUTING -> ADMITTED and EXECUTING -> DONE, UNCERTAIN, FAILED,
-- CANCELLED; not on PROPOSED -> ADMITTED or ADMITTED -> ADMITTED (still unstarted), ADMITTED ->
-- EXECUTING (a claim: the lane is busy) or EXECUTING -> EXECUTING (a reclaim: it stays busy).
-- The guard refuses every other transition before this could run. Like 0002's, these AFTER ROW
-- triggers run once all of the statement's rows are changed, so a completion batch re-hints
-- each lane after all of its rows.
DROP TRIGGER action_promote_after_update ON wharf.action;
DROP TRIGGER action_promote_after_delete ON wharf.action;

CREATE TRIGGER action_promote_after_update AFTER UPDATE OF state ON wharf.action
    FOR EACH ROW
    WHEN (NEW.state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')
          OR (OLD.state = 'EXECUTING' AND NEW.state = 'ADMITTED'))
    EXECUTE FUNCTION wharf.action_promote_next();

-- Erasure deletes live actions; retention deletes only ended ones, which fire nothing.
CREATE TRIGGER action_promote_after_delete AFTER DELETE ON wharf.action
    FOR EACH ROW
    WHEN (OLD.state IN ('PROPOSED', 'ADMITTED', 'EXECUTING'))
    EXECUTE FUNCTION wharf.action_promote_next();
