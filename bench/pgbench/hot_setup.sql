-- A design question for the hot path, put to pgbench (bench/README.md): would the drain's
-- minimal path get markedly cheaper if claims and completions were HOT updates of the action
-- row (no new index entries), with what the claim must find and fence kept in two narrow
-- tables of their own?
--
-- The model (schema `wharf_hot`, dropped and recreated by this file), beside setup.sql's
-- in-place ceiling (`wharf_ceiling`, claim_complete_batch.sql) with the same columns:
-- - `action`: the row, with its primary key only and room on its pages (fillfactor 50), so an
--   update that changes no indexed column stays on its page and adds no index entry;
-- - `ready`: one row per due action (run_at, id, lane), the claim's scan order; the claim
--   deletes what it takes (a delete adds no index entry);
-- - `running`: one row per executing lane (its primary key is the one-executing-per-lane rule)
--   with its lease (indexed, for reclaims); the claim inserts it, the completion deletes it.
-- Left out on purpose, as in setup.sql: lane order probes, idempotency key, expiry, triggers,
-- checks; and, for this model only, whatever ended rows would need indexed (retention by end
-- time, dead letters), which a real design must place where no update touches it.
--
-- psql variables: rows (default 1000000) — due rows to prefill; fillfactor (default 50) — of
-- `action`'s pages, the room left for the claim's and the completion's row versions.
--
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -v rows=1000000 -f bench/pgbench/hot_setup.sql

\if :{?rows}
\else
\set rows 1000000
\endif
\if :{?fillfactor}
\else
\set fillfactor 50
\endif

SET client_min_messages = warning;
DROP SCHEMA IF EXISTS wharf_hot CASCADE;
CREATE SCHEMA wharf_hot;

CREATE TABLE wharf_hot.action (
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
) WITH (fillfactor = :fillfactor);

CREATE TABLE wharf_hot.ready (
    id        bigint      NOT NULL,
    run_at    timestamptz NOT NULL,
    lane_key  text        NOT NULL
);
CREATE INDEX ix_hot_ready ON wharf_hot.ready (run_at, id);

CREATE TABLE wharf_hot.running (
    lane_key          text        PRIMARY KEY,
    id                bigint      NOT NULL,
    epoch             bigint      NOT NULL,
    lease_expires_at  timestamptz NOT NULL
);
CREATE INDEX ix_hot_running_lease ON wharf_hot.running (lease_expires_at);

INSERT INTO wharf_hot.action (lane_key, state, payload, run_at)
SELECT 'lane-' || g, 'ADMITTED', '{}'::jsonb, now() - interval '1 second'
  FROM generate_series(1, :rows) AS g;
INSERT INTO wharf_hot.ready (id, run_at, lane_key)
SELECT id, run_at, lane_key FROM wharf_hot.action;

VACUUM ANALYZE wharf_hot.action;
VACUUM ANALYZE wharf_hot.ready;
VACUUM ANALYZE wharf_hot.running;
