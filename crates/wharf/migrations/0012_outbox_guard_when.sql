-- The guard's rules move into its trigger's WHEN clause, so its PL/pgSQL function runs only for
-- an update it will refuse.
--
-- Owned by `wharf::outbox`. Changes 0002_outbox.sql's trigger without editing that file (its
-- checksum is recorded in every database that ran it).
--
-- Why: every claim, fence, completion, release, demotion and promotion updates wharf.action, and
-- each of those row versions called wharf.action_guard(): a PL/pgSQL call per row, the largest
-- single trigger cost on the hot path (a perf profile of a drain put triggers at about 6 % of the
-- server's time, most of it entering PL/pgSQL). A WHEN clause is evaluated by the executor's own
-- expression machinery, before any function call, and costs a few comparisons.
--
-- What it refuses is unchanged: the WHEN below is true exactly when one of the function's five
-- checks fails (an ended row changing, a transition outside the table, a fixed column changing,
-- an epoch that does not move as a claim says, a re-claim of an at-most-once action whose write
-- started), and the function, run then, raises the same error with the same SQLSTATE (WH001 to
-- WH005) it always did. The WHEN clause and the function state each rule once in their own
-- language; the 49-pair transition test and the guard tests (tests/it/outbox/guard.rs) check the
-- two together, through the trigger as it now is.
DROP TRIGGER action_guard ON wharf.action;

CREATE TRIGGER action_guard BEFORE UPDATE ON wharf.action
    FOR EACH ROW
    WHEN (
        OLD.state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')
        OR (OLD.state, NEW.state) NOT IN (
            ('PROPOSED', 'ADMITTED'), ('PROPOSED', 'CANCELLED'),
            ('ADMITTED', 'EXECUTING'), ('ADMITTED', 'ADMITTED'), ('ADMITTED', 'CANCELLED'),
            ('EXECUTING', 'EXECUTING'), ('EXECUTING', 'ADMITTED'), ('EXECUTING', 'DONE'),
            ('EXECUTING', 'UNCERTAIN'), ('EXECUTING', 'FAILED'), ('EXECUTING', 'CANCELLED'))
        OR NEW.kind IS DISTINCT FROM OLD.kind
        OR NEW.id IS DISTINCT FROM OLD.id
        OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
        OR NEW.content_digest IS DISTINCT FROM OLD.content_digest
        OR NEW.at_most_once IS DISTINCT FROM OLD.at_most_once
        OR NEW.instance_level IS DISTINCT FROM OLD.instance_level
        OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
        OR NEW.project_id IS DISTINCT FROM OLD.project_id
        OR NEW.lane_key IS DISTINCT FROM OLD.lane_key
        OR NEW.subject_account_id IS DISTINCT FROM OLD.subject_account_id
        OR NEW.max_attempts IS DISTINCT FROM OLD.max_attempts
        OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
        OR NEW.created_at IS DISTINCT FROM OLD.created_at
        OR (NEW.payload IS NOT NULL AND NEW.payload IS DISTINCT FROM OLD.payload)
        OR NOT (CASE
                    WHEN OLD.state = 'ADMITTED' AND NEW.state = 'EXECUTING'
                        THEN NEW.epoch = OLD.epoch + 1
                    WHEN OLD.state = 'EXECUTING' AND NEW.state = 'EXECUTING'
                        THEN NEW.epoch IN (OLD.epoch, OLD.epoch + 1)
                    ELSE NEW.epoch = OLD.epoch
                END)
        OR (NEW.state = 'EXECUTING' AND NEW.epoch > OLD.epoch
            AND OLD.at_most_once AND OLD.write_started_at IS NOT NULL))
    EXECUTE FUNCTION wharf.action_guard();
