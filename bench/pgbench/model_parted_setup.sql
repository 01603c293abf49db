-- A fourth design for model.sh (variant parted, --drain only): inplace's table, prefilled by
-- model_setup.sql, turned into a table partitioned by state, so that PostgreSQL itself moves a
-- row out of the live partition when a completion ends it. Would that give moved's gain (ended
-- rows out of the live table and its indexes) without rewriting every statement that reads
-- wharf.action? The statements stay the same text, with the state named where the planner can
-- prune partitions by it (model.sh derives the script from model_inplace.sql).
--
--   action_live   PROPOSED, ADMITTED, EXECUTING
--   action_ended  DONE, UNCERTAIN, FAILED, CANCELLED
--
-- What partitioning forces on wharf's table: every unique index must name the partition key.
-- The primary key becomes (id, state) (ids stay unique by their identity, not by an index); the
-- one-executing-per-lane index (lane_key, state) WHERE EXECUTING, which is the same rule; the
-- idempotency key cannot be unique across the partitions at all, so a real design needs moved's
-- insert-once key table (not modelled: a drain never touches keys, so this variant refuses to
-- enqueue). The CHECKs, the other indexes with their predicates, and the triggers (their
-- definitions copied from inplace's table, WHEN clauses and all) are inplace's.
--
--   psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -v variant=inplace -f bench/pgbench/model_setup.sql
--   psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -f bench/pgbench/model_parted_setup.sql

SET client_min_messages = warning;
ALTER TABLE wharf_model.action RENAME TO action_flat;
-- inplace's columns, defaults and CHECKs (not its identity: ids are copied, the drain makes none).
CREATE TABLE wharf_model.action (
    LIKE wharf_model.action_flat INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
    PRIMARY KEY (id, state)
) PARTITION BY LIST (state);
CREATE TABLE wharf_model.action_live PARTITION OF wharf_model.action
    FOR VALUES IN ('PROPOSED', 'ADMITTED', 'EXECUTING');
CREATE TABLE wharf_model.action_ended PARTITION OF wharf_model.action
    FOR VALUES IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED');

INSERT INTO wharf_model.action SELECT * FROM wharf_model.action_flat ORDER BY id;
-- inplace's triggers and its indexes that are not unique, as they are (their definitions read
-- back from inplace's table, which is then dropped so that the names are free); the unique one
-- that stays, the one-executing-per-lane rule, with the state added.
DO $$
DECLARE
    defs text[];
    def text;
BEGIN
    SELECT array_agg(pg_get_triggerdef(oid)) INTO defs FROM pg_trigger
     WHERE tgrelid = 'wharf_model.action_flat'::regclass AND NOT tgisinternal;
    SELECT defs || array_agg(pg_get_indexdef(indexrelid)) INTO defs FROM pg_index
     WHERE indrelid = 'wharf_model.action_flat'::regclass AND NOT indisunique;
    DROP TABLE wharf_model.action_flat;
    FOREACH def IN ARRAY defs LOOP
        EXECUTE replace(def, 'wharf_model.action_flat', 'wharf_model.action');
    END LOOP;
END $$;
CREATE UNIQUE INDEX ux_action_lane_executing ON wharf_model.action (lane_key, state)
    WHERE state = 'EXECUTING';

VACUUM ANALYZE wharf_model.action;
