-- Inserts a batch of actions in one statement (SPEC §2.1: enqueue_many is one statement).
-- An action whose idempotency key exists already is not inserted (ON CONFLICT DO NOTHING on
-- wharf.action_key, where keys of live and ended actions alike are unique, 0060); the caller
-- reads it back with find_by_keys.sql and compares digests. The key row is written first and
-- draws the action's id; the live row takes it. When any key of the
-- batch exists with a different content digest, nothing of the batch is inserted, so an
-- IdempotencyConflict writes nothing.
-- $1..$14: one array per column, all of the same length, in the caller's order.
-- $15: send the wake-up hint (pg_notify) when a due action was inserted.
--
-- The hint is sent by at most two enqueuing transactions at a time (whichever get one of two
-- transaction-scoped advisory locks; the others skip it). Why: PostgreSQL serializes the commits
-- of notifying transactions, each holding the notification queue's lock across its commit
-- record's flush, so with a hint on every enqueue the enqueue rate was capped at one flush per
-- enqueue (seen: 293 of 500 actions/s offered, start p99 3.5 s, while the same load without
-- wake-ups kept up). A skipped hint is covered by the one the lock holder sends when it commits,
-- by the executor's trailing claim a few milliseconds after every claim that found work, and, if
-- the lock holder rolls back, by polling.
-- The two keys are arbitrary constants reserved for this (documented in ARCHITECTURE.md); an
-- application taking the same advisory keys would only delay hints, never lose an action.

WITH input AS (
    SELECT *
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[],
                  $7::boolean[], $8::boolean[], $9::text[], $10::integer[], $11::jsonb[],
                  $12::text[], $13::timestamptz[], $14::timestamptz[])
           WITH ORDINALITY
           AS i(kind, tenant_id, project_id, lane_key, idempotency_key, content_digest,
                at_most_once, instance_level, state, max_attempts, payload,
                subject_account_id, run_at, expires_at, ord)
),
conflict AS (
    SELECT 1
      FROM input i
      JOIN wharf.action_key k ON k.idempotency_key = i.idempotency_key
     WHERE k.content_digest <> i.content_digest
     LIMIT 1
),
keys AS (
    INSERT INTO wharf.action_key (idempotency_key, content_digest)
    SELECT idempotency_key, content_digest
      FROM input
     WHERE NOT EXISTS (SELECT 1 FROM conflict)
     ORDER BY ord
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING idempotency_key, action_id
),
ins AS (
    INSERT INTO wharf.action_live (id, kind, tenant_id, project_id, lane_key, idempotency_key,
                                   content_digest, at_most_once, instance_level, state,
                                   max_attempts, payload, subject_account_id, run_at, expires_at)
    SELECT k.action_id, i.kind, i.tenant_id, i.project_id, i.lane_key, i.idempotency_key,
           i.content_digest, i.at_most_once, i.instance_level, i.state, i.max_attempts,
           i.payload, i.subject_account_id, coalesce(i.run_at, now()), i.expires_at
      FROM keys k
      JOIN input i ON i.idempotency_key = k.idempotency_key
     ORDER BY i.ord
    RETURNING id, idempotency_key, state, run_at
),
wake AS (
    SELECT pg_notify('wharf_action', '')
      FROM (SELECT 1 FROM ins WHERE ins.state = 'ADMITTED' AND ins.run_at <= now() LIMIT 1) due
     WHERE $15::boolean
       AND (pg_try_advisory_xact_lock(8604530432651010401)
            OR pg_try_advisory_xact_lock(8604530432651010402))
)
SELECT ins.id, ins.idempotency_key, (SELECT count(*) FROM wake) AS woken
  FROM ins
