-- A model for two design questions (model.sh): would the drain get markedly faster if ended
-- actions moved out of the live table, and faster again if the claim changed no indexed column
-- of the live row (a HOT update)? Three designs of wharf.action side by side in one schema,
-- `wharf_model`, which this file drops and recreates every time:
--
-- 1. inplace: wharf.action as the migrations leave it (0002, 0011-0014, 0018, 0040): one table;
--    a completion updates the row into DONE (payload NULL, ended_at set).
--      table wharf_model.action
-- 2. moved: the live actions (PROPOSED, ADMITTED, EXECUTING) in one table with the live indexes,
--    ended actions in an append-only table, and the idempotency key unique across both through
--    an insert-once key table. A completion is one statement that deletes the rows from the live
--    table and inserts them into the ended one.
--      tables wharf_model.live, wharf_model.ended, wharf_model.action_key
-- 3. hot: moved, with the claim a HOT update of the live row. No index of the live table names a
--    column that a claim, a release or a completion changes (state, epoch, attempt, lease,
--    write mark, head hint), in a column or a predicate. What the claim must find and what it
--    must own move into two narrow tables: `hot_ready`, the head candidates (the rows
--    ix_action_due holds today: ADMITTED, hinted as a lane head), which the claim deletes from;
--    and `hot_running`, one row per executing lane, its primary key the one-executing-per-lane
--    rule (ux_action_lane_executing today) and its lease indexed for reclaims (ix_action_lease),
--    which the claim inserts and the completion deletes. The live table keeps room on its pages
--    (fillfactor) so that the claim's new row version fits beside the old one.
--      tables wharf_model.hot_live, wharf_model.hot_ready, wharf_model.hot_running, and moved's
--      wharf_model.ended and wharf_model.action_key
--
-- Why an insert-once key table (moved): a key must stay refused from enqueue until retention
-- deletes the ended action. A unique index on each of live and ended cannot say that across the
-- two: a completion's DELETE frees the live index entry as it commits, so an enqueue of the same
-- key waiting on that entry would go on and insert a duplicate of the ended row (closing that
-- needs a lock per key or a re-check of ended under a lock, on every enqueue). action_key
-- (idempotency_key PRIMARY KEY, action_id, content_digest) is written once at enqueue, in the
-- same statement as the live row, and never updated, so its unique index alone decides every
-- race, for live and ended actions alike (ON CONFLICT DO NOTHING, as enqueue.sql does today). It
-- carries the content digest too, so enqueue's digest comparison and find_by_keys.sql read only
-- it (key -> action_id -> the live or ended row by primary key when the row itself is needed).
-- Then neither live nor ended needs an index on the key. Its costs, not in this drain: retention
-- deletes the action_key row with the ended row (two deletes instead of one), and erasure of a
-- live action deletes its key row too (or keeps it, as a decision).
--
-- What the inplace model leaves out of wharf's real table: nothing of the columns, CHECKs (as
-- after 0018), indexes (all ten, with their predicates) or trigger WHEN clauses (0012's guard,
-- 0013's promotion, 0018's fixed-column check). The trigger functions behind the guard and the
-- fixed-column check are a stand-in that only raises (wharf_model.refuse): in wharf they run only
-- when their WHEN says the row is refused, which never happens in this drain. The promotion
-- function is 0013's read-committed branch (it also never fires here: nothing is demoted, so no
-- row has wakes_lane). The NOTIFY wake-up of enqueue.sql, demote.sql and the sweeps are not
-- modelled (the same in every design).
--
-- What hot changes besides the layout, and what it leaves open:
-- - The claim's two lane probes stay two: the executing probe reads hot_running's primary key,
--   the earlier-action probe walks ix_hot_live_lane (every live row of a lane, EXECUTING ones
--   too, so the state is a filter there, not a predicate). A lane's EXECUTING row is always its
--   lowest id, so the walk reads at most that one row before the answer.
-- - head_hint becomes membership of hot_ready, so demotion deletes from it and promotion inserts
--   into it (0013's function, with that insert); neither runs in this drain.
-- - hot_ready and hot_running are queue tables: every action inserts and deletes a row in each,
--   so they live on autovacuum (after a 20 s drain both hold tens of MB for a few hundred live
--   rows). A real design would set their autovacuum thresholds low; this model leaves the
--   server's defaults, as for every other table here.
-- - Left open, not modelled: the expiry sweep (ix_hot_live_expiry now holds EXECUTING rows too),
--   the console's lists by state (no state index on the live table), and operator actions.
--
-- psql variables:
--   rows    (default 50000) due ADMITTED actions to prefill, one lane each: the backlog every
--           claim takes the oldest rows of, kept at this size by the scripts' own enqueues.
--   history (default 0) ended DONE actions to prefill, as the table holds them until retention
--           (30 days in wharf): inplace in wharf_model.action, moved and hot in ended and
--           action_key.
--   variant (default both) inplace, moved, hot or both (inplace and moved): whose tables are
--           prefilled (every design's tables are always created, empty when not prefilled).
--   fillfactor (default 50) of hot_live's pages: the room left for a claim's row version.
--
--   psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -v variant=moved -f bench/pgbench/model_setup.sql

\if :{?rows}
\else
\set rows 50000
\endif
\if :{?history}
\else
\set history 0
\endif
\if :{?variant}
\else
\set variant both
\endif
\if :{?fillfactor}
\else
\set fillfactor 50
\endif

SELECT :'variant' IN ('inplace', 'both') AS fill_inplace,
       :'variant' IN ('moved', 'both') AS fill_moved,
       :'variant' = 'hot' AS fill_hot,
       :'variant' IN ('moved', 'hot', 'both') AS fill_keyed,
       CASE WHEN :'variant' = 'hot' THEN 'hot_live' ELSE 'live' END AS live_table,
       :'variant' IN ('inplace', 'moved', 'hot', 'both') AS variant_ok
\gset
\if :variant_ok
\else
\echo model_setup.sql: variant must be inplace, moved, hot or both
\quit 3
\endif

SET client_min_messages = warning;
DROP SCHEMA IF EXISTS wharf_model CASCADE;
CREATE SCHEMA wharf_model;

-- Stands in for wharf.action_guard() and wharf.action_refuse_fixed_columns(): their triggers'
-- WHEN clauses (kept below) decide when they run, and then they only raise.
CREATE FUNCTION wharf_model.refuse() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'wharf_model.%: % refused (%)', TG_TABLE_NAME, TG_ARGV[0], TG_OP
        USING ERRCODE = 'WH000';
END
$$;

-- ===================================================================================== inplace

CREATE TABLE wharf_model.action (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind                text        NOT NULL,
    tenant_id           text,
    project_id          text,
    lane_key            text        NOT NULL,
    idempotency_key     text        NOT NULL,
    content_digest      bytea       NOT NULL,
    at_most_once        boolean     NOT NULL,
    instance_level      boolean     NOT NULL,
    state               text        NOT NULL,
    stop_reason         text,
    epoch               bigint      NOT NULL DEFAULT 0,
    attempt             integer     NOT NULL DEFAULT 0,
    max_attempts        integer     NOT NULL,
    payload             jsonb,
    subject_account_id  text,
    run_at              timestamptz NOT NULL,
    expires_at          timestamptz,
    lease_expires_at    timestamptz,
    write_started_at    timestamptz,
    readback_ref        text,
    error_code          text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    ended_at            timestamptz,
    head_hint           boolean     NOT NULL DEFAULT true,
    wakes_lane          boolean     NOT NULL DEFAULT false,   -- 0013

    CONSTRAINT ck_action_state CHECK (state IN
        ('PROPOSED', 'ADMITTED', 'EXECUTING', 'DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')),
    CONSTRAINT ck_action_stop_reason CHECK (stop_reason IS NULL OR (state, stop_reason) IN (
        ('DONE', 'DONE'),
        ('FAILED', 'ATTEMPTS_EXHAUSTED'),
        ('FAILED', 'PROVIDER_REFUSED'),
        ('UNCERTAIN', 'UNCERTAIN_PROVIDER'),
        ('UNCERTAIN', 'LEASE_LOST_AFTER_WRITE'),
        ('CANCELLED', 'EXPIRED'),
        ('CANCELLED', 'CANCELLED_BY_ADAPTER'),
        ('CANCELLED', 'REFUSED'),
        ('CANCELLED', 'OPERATOR'))),
    CONSTRAINT ck_action_ended CHECK (
        (state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED'))
            = (stop_reason IS NOT NULL)
        AND (state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')) = (ended_at IS NOT NULL)
        AND (state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')) = (payload IS NULL)),
    CONSTRAINT ck_action_counters CHECK (epoch >= 0 AND attempt >= 0 AND max_attempts >= 1),
    CONSTRAINT ck_action_lease CHECK (state <> 'EXECUTING' OR lease_expires_at IS NOT NULL),
    CONSTRAINT ck_action_readback_ref CHECK (readback_ref IS NULL OR octet_length(readback_ref) <= 1024),
    -- 0018's form.
    CONSTRAINT ck_action_error_code CHECK (
        error_code IS NULL
        OR (octet_length(error_code) BETWEEN 1 AND 64
            AND ltrim(error_code, 'abcdefghijklmnopqrstuvwxyz0123456789_.-') = '')),
    CONSTRAINT ux_action_idempotency_key UNIQUE (idempotency_key)
);

-- The other eight indexes (with the primary key and the key's: ten).
CREATE UNIQUE INDEX ux_action_lane_executing ON wharf_model.action (lane_key) WHERE state = 'EXECUTING';
CREATE INDEX ix_action_lane_pending ON wharf_model.action (lane_key, id)
    WHERE state IN ('PROPOSED', 'ADMITTED');
CREATE INDEX ix_action_due ON wharf_model.action (run_at, id) WHERE state = 'ADMITTED' AND head_hint;
CREATE INDEX ix_action_lease ON wharf_model.action (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;                                              -- 0014
CREATE INDEX ix_action_expiry ON wharf_model.action (expires_at)
    WHERE state IN ('PROPOSED', 'ADMITTED') AND expires_at IS NOT NULL;
CREATE INDEX ix_action_ended ON wharf_model.action (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX ix_action_subject ON wharf_model.action (subject_account_id)
    WHERE subject_account_id IS NOT NULL;
CREATE INDEX ix_action_dead_letters ON wharf_model.action (tenant_id, project_id, ended_at, id)
    WHERE state = 'FAILED';                                                          -- 0040

-- 0018: the fixed columns' checks, at insert only.
CREATE TRIGGER action_fixed_columns BEFORE INSERT ON wharf_model.action
    FOR EACH ROW
    WHEN (NOT (octet_length(NEW.kind) BETWEEN 1 AND 64
               AND ltrim(NEW.kind, 'abcdefghijklmnopqrstuvwxyz0123456789_.-') = ''
               AND (NEW.tenant_id IS NULL OR octet_length(NEW.tenant_id) BETWEEN 1 AND 256)
               AND (NEW.project_id IS NULL OR octet_length(NEW.project_id) BETWEEN 1 AND 256)
               AND (NEW.subject_account_id IS NULL
                    OR octet_length(NEW.subject_account_id) BETWEEN 1 AND 256)
               AND octet_length(NEW.content_digest) = 32
               AND octet_length(NEW.lane_key) BETWEEN 1 AND 256
               AND octet_length(NEW.idempotency_key) BETWEEN 1 AND 256
               AND (NEW.tenant_id IS NOT NULL OR NEW.instance_level)))
    EXECUTE FUNCTION wharf_model.refuse('fixed columns');

-- 0012: the guard, its rules in the WHEN clause.
CREATE TRIGGER action_guard BEFORE UPDATE ON wharf_model.action
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
    EXECUTE FUNCTION wharf_model.refuse('guard');

-- 0013's promotion (read-committed branch only).
CREATE FUNCTION wharf_model.action_promote_next() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE wharf_model.action
       SET head_hint = true, wakes_lane = true
     WHERE id = (SELECT n.id FROM wharf_model.action n
                  WHERE n.lane_key = OLD.lane_key AND n.state IN ('PROPOSED', 'ADMITTED')
                  ORDER BY n.id LIMIT 1)
       AND state = 'ADMITTED' AND NOT (head_hint AND wakes_lane);
    RETURN NULL;
END
$$;

CREATE TRIGGER action_promote_after_update AFTER UPDATE OF state ON wharf_model.action
    FOR EACH ROW
    WHEN ((OLD.wakes_lane OR OLD.state = 'PROPOSED')
          AND (NEW.state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')
               OR (OLD.state = 'EXECUTING' AND NEW.state = 'ADMITTED')))
    EXECUTE FUNCTION wharf_model.action_promote_next();

CREATE TRIGGER action_promote_after_delete AFTER DELETE ON wharf_model.action
    FOR EACH ROW
    WHEN ((OLD.wakes_lane OR OLD.state = 'PROPOSED')
          AND OLD.state IN ('PROPOSED', 'ADMITTED', 'EXECUTING'))
    EXECUTE FUNCTION wharf_model.action_promote_next();

-- ======================================================================================= moved

-- Ids come from one sequence, taken by action_key at enqueue and copied into live, then ended.
CREATE SEQUENCE wharf_model.moved_id_seq AS bigint;

-- The key table: one row per action from enqueue to retention, never updated.
CREATE TABLE wharf_model.action_key (
    idempotency_key  text   PRIMARY KEY,
    action_id        bigint NOT NULL DEFAULT nextval('wharf_model.moved_id_seq'),
    content_digest   bytea  NOT NULL,
    CONSTRAINT ck_action_key_idempotency_key CHECK (octet_length(idempotency_key) BETWEEN 1 AND 256),
    CONSTRAINT ck_action_key_digest CHECK (octet_length(content_digest) = 32)
);
-- No index on action_id and no foreign keys (a foreign key costs a lookup per write): the id is
-- read from the key, never the other way round.

-- Live actions: wharf.action's columns less stop_reason and ended_at (always NULL while live);
-- the payload is always there. idempotency_key and content_digest stay (the claim returns the
-- key), unindexed.
CREATE TABLE wharf_model.live (
    id                  bigint      PRIMARY KEY,
    kind                text        NOT NULL,
    tenant_id           text,
    project_id          text,
    lane_key            text        NOT NULL,
    idempotency_key     text        NOT NULL,
    content_digest      bytea       NOT NULL,
    at_most_once        boolean     NOT NULL,
    instance_level      boolean     NOT NULL,
    state               text        NOT NULL,
    epoch               bigint      NOT NULL DEFAULT 0,
    attempt             integer     NOT NULL DEFAULT 0,
    max_attempts        integer     NOT NULL,
    payload             jsonb       NOT NULL,
    subject_account_id  text,
    run_at              timestamptz NOT NULL,
    expires_at          timestamptz,
    lease_expires_at    timestamptz,
    write_started_at    timestamptz,
    readback_ref        text,
    error_code          text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    head_hint           boolean     NOT NULL DEFAULT true,
    wakes_lane          boolean     NOT NULL DEFAULT false,

    CONSTRAINT ck_live_state CHECK (state IN ('PROPOSED', 'ADMITTED', 'EXECUTING')),
    CONSTRAINT ck_live_counters CHECK (epoch >= 0 AND attempt >= 0 AND max_attempts >= 1),
    CONSTRAINT ck_live_lease CHECK (state <> 'EXECUTING' OR lease_expires_at IS NOT NULL),
    CONSTRAINT ck_live_readback_ref CHECK (readback_ref IS NULL OR octet_length(readback_ref) <= 1024),
    CONSTRAINT ck_live_error_code CHECK (
        error_code IS NULL
        OR (octet_length(error_code) BETWEEN 1 AND 64
            AND ltrim(error_code, 'abcdefghijklmnopqrstuvwxyz0123456789_.-') = ''))
);

-- The live indexes of wharf.action (primary key above): seven in all. Erasure by subject needs
-- its index on both tables.
CREATE UNIQUE INDEX ux_live_lane_executing ON wharf_model.live (lane_key) WHERE state = 'EXECUTING';
CREATE INDEX ix_live_lane_pending ON wharf_model.live (lane_key, id)
    WHERE state IN ('PROPOSED', 'ADMITTED');
CREATE INDEX ix_live_due ON wharf_model.live (run_at, id) WHERE state = 'ADMITTED' AND head_hint;
CREATE INDEX ix_live_lease ON wharf_model.live (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX ix_live_expiry ON wharf_model.live (expires_at)
    WHERE state IN ('PROPOSED', 'ADMITTED') AND expires_at IS NOT NULL;
CREATE INDEX ix_live_subject ON wharf_model.live (subject_account_id)
    WHERE subject_account_id IS NOT NULL;

CREATE TRIGGER live_fixed_columns BEFORE INSERT ON wharf_model.live
    FOR EACH ROW
    WHEN (NOT (octet_length(NEW.kind) BETWEEN 1 AND 64
               AND ltrim(NEW.kind, 'abcdefghijklmnopqrstuvwxyz0123456789_.-') = ''
               AND (NEW.tenant_id IS NULL OR octet_length(NEW.tenant_id) BETWEEN 1 AND 256)
               AND (NEW.project_id IS NULL OR octet_length(NEW.project_id) BETWEEN 1 AND 256)
               AND (NEW.subject_account_id IS NULL
                    OR octet_length(NEW.subject_account_id) BETWEEN 1 AND 256)
               AND octet_length(NEW.content_digest) = 32
               AND octet_length(NEW.lane_key) BETWEEN 1 AND 256
               AND octet_length(NEW.idempotency_key) BETWEEN 1 AND 256
               AND (NEW.tenant_id IS NOT NULL OR NEW.instance_level)))
    EXECUTE FUNCTION wharf_model.refuse('fixed columns');

-- The guard's WHEN, less what a live row cannot be: no ended OLD row, and only the transitions
-- between live states (an ending is a DELETE here; the completion's WHERE demands EXECUTING and
-- the epoch, and ended's CHECKs the end state and stop reason).
CREATE TRIGGER live_guard BEFORE UPDATE ON wharf_model.live
    FOR EACH ROW
    WHEN (
        (OLD.state, NEW.state) NOT IN (
            ('PROPOSED', 'ADMITTED'),
            ('ADMITTED', 'EXECUTING'), ('ADMITTED', 'ADMITTED'),
            ('EXECUTING', 'EXECUTING'), ('EXECUTING', 'ADMITTED'))
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
        OR NEW.payload IS DISTINCT FROM OLD.payload
        OR NOT (CASE
                    WHEN OLD.state = 'ADMITTED' AND NEW.state = 'EXECUTING'
                        THEN NEW.epoch = OLD.epoch + 1
                    WHEN OLD.state = 'EXECUTING' AND NEW.state = 'EXECUTING'
                        THEN NEW.epoch IN (OLD.epoch, OLD.epoch + 1)
                    ELSE NEW.epoch = OLD.epoch
                END)
        OR (NEW.state = 'EXECUTING' AND NEW.epoch > OLD.epoch
            AND OLD.at_most_once AND OLD.write_started_at IS NOT NULL))
    EXECUTE FUNCTION wharf_model.refuse('guard');

CREATE FUNCTION wharf_model.live_promote_next() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE wharf_model.live
       SET head_hint = true, wakes_lane = true
     WHERE id = (SELECT n.id FROM wharf_model.live n
                  WHERE n.lane_key = OLD.lane_key AND n.state IN ('PROPOSED', 'ADMITTED')
                  ORDER BY n.id LIMIT 1)
       AND state = 'ADMITTED' AND NOT (head_hint AND wakes_lane);
    RETURN NULL;
END
$$;

-- 0013's events: a release back to ADMITTED is an update; every ending (completion, refusal,
-- expiry, sweep) and erasure is a delete from live.
CREATE TRIGGER live_promote_after_update AFTER UPDATE OF state ON wharf_model.live
    FOR EACH ROW
    WHEN (OLD.wakes_lane AND OLD.state = 'EXECUTING' AND NEW.state = 'ADMITTED')
    EXECUTE FUNCTION wharf_model.live_promote_next();

CREATE TRIGGER live_promote_after_delete AFTER DELETE ON wharf_model.live
    FOR EACH ROW
    WHEN (OLD.wakes_lane OR OLD.state = 'PROPOSED')
    EXECUTE FUNCTION wharf_model.live_promote_next();

-- Ended actions: an ended row's columns (no payload, lease, head hint or wake mark), append-only.
CREATE TABLE wharf_model.ended (
    id                  bigint      PRIMARY KEY,
    kind                text        NOT NULL,
    tenant_id           text,
    project_id          text,
    lane_key            text        NOT NULL,
    idempotency_key     text        NOT NULL,
    content_digest      bytea       NOT NULL,
    at_most_once        boolean     NOT NULL,
    instance_level      boolean     NOT NULL,
    state               text        NOT NULL,
    stop_reason         text        NOT NULL,
    epoch               bigint      NOT NULL,
    attempt             integer     NOT NULL,
    max_attempts        integer     NOT NULL,
    subject_account_id  text,
    run_at              timestamptz NOT NULL,
    expires_at          timestamptz,
    write_started_at    timestamptz,
    readback_ref        text,
    error_code          text,
    created_at          timestamptz NOT NULL,
    ended_at            timestamptz NOT NULL,

    -- ck_action_stop_reason with ck_action_ended's "an ended row has a stop reason".
    CONSTRAINT ck_ended_stop_reason CHECK ((state, stop_reason) IN (
        ('DONE', 'DONE'),
        ('FAILED', 'ATTEMPTS_EXHAUSTED'),
        ('FAILED', 'PROVIDER_REFUSED'),
        ('UNCERTAIN', 'UNCERTAIN_PROVIDER'),
        ('UNCERTAIN', 'LEASE_LOST_AFTER_WRITE'),
        ('CANCELLED', 'EXPIRED'),
        ('CANCELLED', 'CANCELLED_BY_ADAPTER'),
        ('CANCELLED', 'REFUSED'),
        ('CANCELLED', 'OPERATOR'))),
    CONSTRAINT ck_ended_counters CHECK (epoch >= 0 AND attempt >= 0 AND max_attempts >= 1),
    CONSTRAINT ck_ended_readback_ref CHECK (readback_ref IS NULL OR octet_length(readback_ref) <= 1024),
    CONSTRAINT ck_ended_error_code CHECK (
        error_code IS NULL
        OR (octet_length(error_code) BETWEEN 1 AND 64
            AND ltrim(error_code, 'abcdefghijklmnopqrstuvwxyz0123456789_.-') = ''))
);

-- Primary key above; retention oldest first; erasure; dead letters. Key lookups go through
-- action_key.
CREATE INDEX ix_ended_ended ON wharf_model.ended (ended_at);
CREATE INDEX ix_ended_subject ON wharf_model.ended (subject_account_id)
    WHERE subject_account_id IS NOT NULL;
CREATE INDEX ix_ended_dead_letters ON wharf_model.ended (tenant_id, project_id, ended_at, id)
    WHERE state = 'FAILED';

-- The guard's "an ended action never changes" (WH002). Retention deletes.
CREATE TRIGGER ended_guard BEFORE UPDATE ON wharf_model.ended
    FOR EACH ROW EXECUTE FUNCTION wharf_model.refuse('an ended action never changes');

-- ========================================================================================= hot

-- Live actions: moved's live table, its columns, defaults and CHECKs, with room on its pages.
-- head_hint stays as a column but is not read or written: a row is hinted as a head by being in
-- hot_ready. No index of this table names a column that a claim, a release or a retry changes,
-- nor a state in a predicate, so each of those is a HOT update when its page has room.
CREATE TABLE wharf_model.hot_live (
    LIKE wharf_model.live INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
    PRIMARY KEY (id)
) WITH (fillfactor = :fillfactor);

-- Every live row of a lane in id order (ix_action_lane_pending without its state predicate, so
-- EXECUTING rows are in it too): the earlier-action probe and the promotion read it. Expiry and
-- erasure as in live, their predicates on fixed columns only (the expiry sweep tests the state
-- on the row).
CREATE INDEX ix_hot_live_lane ON wharf_model.hot_live (lane_key, id);
CREATE INDEX ix_hot_live_expiry ON wharf_model.hot_live (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX ix_hot_live_subject ON wharf_model.hot_live (subject_account_id)
    WHERE subject_account_id IS NOT NULL;

-- The head candidates: an ADMITTED row hinted as its lane's head, with what the claim's window
-- orders and filters by. Enqueue and promotion insert, the claim and demotion delete; its
-- primary key serves those deletes by id (demotion, erasure, cancellation).
CREATE TABLE wharf_model.hot_ready (
    id        bigint      PRIMARY KEY,
    kind      text        NOT NULL,
    run_at    timestamptz NOT NULL,
    lane_key  text        NOT NULL
);
CREATE INDEX ix_hot_ready_due ON wharf_model.hot_ready (run_at, id);

-- One row per executing lane: the claim inserts it (the primary key refuses a second executing
-- action in a lane, as ux_action_lane_executing does), a reclaim moves its lease, the
-- completion and the release delete it.
CREATE TABLE wharf_model.hot_running (
    lane_key          text        PRIMARY KEY,
    id                bigint      NOT NULL,
    lease_expires_at  timestamptz NOT NULL
);
CREATE INDEX ix_hot_running_lease ON wharf_model.hot_running (lease_expires_at);

-- live's fixed-column check and guard, their WHEN clauses copied from the catalogue so that the
-- two designs cannot drift apart.
SELECT replace(replace(pg_get_triggerdef(t.oid), 'ON wharf_model.live ', 'ON wharf_model.hot_live '),
               'TRIGGER live_', 'TRIGGER hot_live_')
  FROM pg_trigger t
 WHERE t.tgrelid = 'wharf_model.live'::regclass AND t.tgname IN ('live_fixed_columns', 'live_guard')
\gexec

-- 0013's promotion: the lane's next unstarted row becomes a head candidate again.
CREATE FUNCTION wharf_model.hot_promote_next() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE wharf_model.hot_live
       SET wakes_lane = true
     WHERE id = (SELECT n.id FROM wharf_model.hot_live n
                  WHERE n.lane_key = OLD.lane_key AND n.state IN ('PROPOSED', 'ADMITTED')
                  ORDER BY n.lane_key, n.id LIMIT 1)
       AND state = 'ADMITTED' AND NOT wakes_lane;
    INSERT INTO wharf_model.hot_ready (id, kind, run_at, lane_key)
    SELECT n.id, n.kind, n.run_at, n.lane_key
      FROM wharf_model.hot_live n
     WHERE n.lane_key = OLD.lane_key AND n.state = 'ADMITTED'
     ORDER BY n.lane_key, n.id LIMIT 1
    ON CONFLICT (id) DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER hot_live_promote_after_update AFTER UPDATE OF state ON wharf_model.hot_live
    FOR EACH ROW
    WHEN (OLD.wakes_lane AND OLD.state = 'EXECUTING' AND NEW.state = 'ADMITTED')
    EXECUTE FUNCTION wharf_model.hot_promote_next();

CREATE TRIGGER hot_live_promote_after_delete AFTER DELETE ON wharf_model.hot_live
    FOR EACH ROW
    WHEN (OLD.wakes_lane OR OLD.state = 'PROPOSED')
    EXECUTE FUNCTION wharf_model.hot_promote_next();

-- ===================================================================================== prefill
-- The same rows for every design: kind email.send, one tenant and project, its own lane and a
-- random key (uuid) per action, no subject or expiry, a payload of about 200 bytes. History
-- rows first (lower ids), as in a table that has been running.

CREATE TEMP TABLE model_gen AS
SELECT g AS ord, g <= :history AS ended, gen_random_uuid()::text AS u,
       nextval('wharf_model.moved_id_seq') AS id   -- moved only (inplace takes its identity)
  FROM generate_series(1, :history + :rows) AS g;

\if :fill_inplace
INSERT INTO wharf_model.action (kind, tenant_id, project_id, lane_key, idempotency_key,
                                content_digest, at_most_once, instance_level, state, stop_reason,
                                epoch, attempt, max_attempts, payload, subject_account_id,
                                run_at, expires_at, write_started_at, created_at, ended_at)
SELECT 'email.send', 'tenant-1', 'project-1', 'lane-' || u, 'key-' || u,
       sha256(convert_to(u, 'UTF8')), false, false,
       CASE WHEN ended THEN 'DONE' ELSE 'ADMITTED' END,
       CASE WHEN ended THEN 'DONE' END,
       CASE WHEN ended THEN 1 ELSE 0 END, CASE WHEN ended THEN 1 ELSE 0 END, 5,
       CASE WHEN ended THEN NULL ELSE
           jsonb_build_object('to', 'user-' || u || '@example.com', 'template', 'welcome',
                              'locale', 'en',
                              'vars', '{"name": "Ada Lovelace", "plan": "pro", "trial_days": 14}'::jsonb)
       END,
       NULL,
       CASE WHEN ended THEN now() - interval '1 day' ELSE now() - interval '1 second' END,
       NULL,
       CASE WHEN ended THEN now() - interval '1 day' END,
       CASE WHEN ended THEN now() - interval '1 day' ELSE now() - interval '1 second' END,
       CASE WHEN ended THEN now() - interval '1 day' END
  FROM model_gen ORDER BY ord;
\endif

-- moved and hot share the key and ended tables, and their live tables have the same columns.
\if :fill_keyed
INSERT INTO wharf_model.action_key (idempotency_key, action_id, content_digest)
SELECT 'key-' || u, id, sha256(convert_to(u, 'UTF8')) FROM model_gen ORDER BY ord;
INSERT INTO wharf_model.ended (id, kind, tenant_id, project_id, lane_key, idempotency_key,
                               content_digest, at_most_once, instance_level, state, stop_reason,
                               epoch, attempt, max_attempts, subject_account_id, run_at,
                               expires_at, write_started_at, created_at, ended_at)
SELECT id, 'email.send', 'tenant-1', 'project-1', 'lane-' || u, 'key-' || u,
       sha256(convert_to(u, 'UTF8')), false, false, 'DONE', 'DONE', 1, 1, 5, NULL,
       now() - interval '1 day', NULL, now() - interval '1 day', now() - interval '1 day',
       now() - interval '1 day'
  FROM model_gen WHERE ended ORDER BY ord;
INSERT INTO wharf_model.:live_table (id, kind, tenant_id, project_id, lane_key, idempotency_key,
                              content_digest, at_most_once, instance_level, state, max_attempts,
                              payload, subject_account_id, run_at, expires_at, created_at)
SELECT id, 'email.send', 'tenant-1', 'project-1', 'lane-' || u, 'key-' || u,
       sha256(convert_to(u, 'UTF8')), false, false, 'ADMITTED', 5,
       jsonb_build_object('to', 'user-' || u || '@example.com', 'template', 'welcome',
                          'locale', 'en',
                          'vars', '{"name": "Ada Lovelace", "plan": "pro", "trial_days": 14}'::jsonb),
       NULL, now() - interval '1 second', NULL, now() - interval '1 second'
  FROM model_gen WHERE NOT ended ORDER BY ord;
\endif

\if :fill_hot
INSERT INTO wharf_model.hot_ready (id, kind, run_at, lane_key)
SELECT id, kind, run_at, lane_key FROM wharf_model.hot_live ORDER BY id;
\endif

DROP TABLE model_gen;

-- A settled table (visibility map, statistics), as setup.sql and wharf's benchmark do.
VACUUM ANALYZE wharf_model.action;
VACUUM ANALYZE wharf_model.action_key;
VACUUM ANALYZE wharf_model.live;
VACUUM ANALYZE wharf_model.ended;
VACUUM ANALYZE wharf_model.hot_live;
VACUUM ANALYZE wharf_model.hot_ready;
VACUUM ANALYZE wharf_model.hot_running;
