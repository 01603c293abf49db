-- The PostgreSQL ceiling for wharf's outbox (bench/README.md): a minimal model of the fenced
-- path, so pgbench can say how many claim + fence + complete cycles this machine's PostgreSQL can
-- do at most, beside wharf's own figure from the same run.
--
-- It models wharf.action (crates/wharf/migrations/0002_outbox.sql) with the minimum of columns the
-- fenced path reads or writes: the state, the claim's epoch and attempt, the lease, the write
-- fence, the payload (dropped at the end, as wharf does), the end time; the due index and the
-- one-executing-per-lane unique index, because every claim and completion must maintain them.
-- Left out on purpose, so this is a ceiling and not a copy: the lane-order probes of wharf's
-- claim (each row here has its own lane), idempotency key and digest, tenant scope, kind filter,
-- expiry, head hint, the guard and promote triggers, check constraints, and batching (one row
-- per claim). It is independent of wharf's real schema: it lives in its own schema,
-- `wharf_ceiling`, and this file drops and recreates that schema every time.
--
-- psql variables: rows (default 200000) — due rows to prefill. Size it above what the run can
-- drain (run.sh does): a claim that finds no due row aborts the pgbench client on purpose,
-- instead of counting empty claims as work.
--
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -v rows=1000000 -f bench/pgbench/setup.sql

\if :{?rows}
\else
\set rows 200000
\endif

SET client_min_messages = warning;
DROP SCHEMA IF EXISTS wharf_ceiling CASCADE;
CREATE SCHEMA wharf_ceiling;

-- One row per action, the columns the fenced path touches.
CREATE TABLE wharf_ceiling.action (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lane_key          text        NOT NULL,
    state             text        NOT NULL,
    epoch             bigint      NOT NULL DEFAULT 0,
    attempt           integer     NOT NULL DEFAULT 0,
    payload           jsonb,
    run_at            timestamptz NOT NULL DEFAULT now(),
    lease_expires_at  timestamptz,
    write_started_at  timestamptz,
    ended_at          timestamptz
);

-- As wharf's ix_action_due (without the head hint): the claim's scan order.
CREATE INDEX ix_ceiling_due ON wharf_ceiling.action (run_at, id) WHERE state = 'ADMITTED';
-- As wharf's ux_action_lane_executing: every claim and completion maintains it.
CREATE UNIQUE INDEX ux_ceiling_lane_executing ON wharf_ceiling.action (lane_key)
    WHERE state = 'EXECUTING';

-- The insert ceiling: a plain single-row insert commit, the floor under one enqueue.
CREATE TABLE wharf_ceiling.enqueued (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lane_key    text        NOT NULL,
    payload     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Due a second ago, so the claim's `run_at <= now()` holds for every row from the start.
INSERT INTO wharf_ceiling.action (lane_key, state, payload, run_at)
SELECT 'lane-' || g, 'ADMITTED', '{}'::jsonb, now() - interval '1 second'
  FROM generate_series(1, :rows) AS g;

-- A settled table (visibility map, statistics) as a long-running system has; wharf's benchmark
-- vacuums and analyzes its table at the same point.
VACUUM ANALYZE wharf_ceiling.action;
VACUUM ANALYZE wharf_ceiling.enqueued;
