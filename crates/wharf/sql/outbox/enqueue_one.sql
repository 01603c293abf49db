-- enqueue.sql for one action, an application's commonest call (one effect in the transaction
-- of the change that causes it): the same insert, wake-up and result, from scalar parameters.
--
-- Why a second text: PostgreSQL prices a generic plan's unnest of a parameter array at 100
-- elements against a custom plan's exact count, so it planned enqueue.sql again on every
-- execution, and at one action per statement planning is most of the statement's server time
-- (BENCHMARKS.md). An INSERT of VALUES reads no table, so its generic plan is right at any size
-- and is reused after a few executions (the live row's insert reads only the key row's CTE).
-- enqueue.sql's conflict probe is not needed here: with one action, an existing key means
-- nothing is inserted (ON CONFLICT DO NOTHING on wharf.action_key, whose row draws the id the
-- live row takes), and the caller reads the key back and compares digests, as it does for every
-- key a batch did not insert.
-- $1..$14: the columns of enqueue.sql's arrays, one value each. $15: send the wake-up hint
-- (see enqueue.sql for the two advisory locks).
WITH key AS (
    INSERT INTO wharf.action_key (idempotency_key, content_digest)
    VALUES ($5::text, $6::bytea)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING action_id
),
ins AS (
    INSERT INTO wharf.action_live (id, kind, tenant_id, project_id, lane_key, idempotency_key,
                                   content_digest, at_most_once, instance_level, state,
                                   max_attempts, payload, subject_account_id, run_at, expires_at)
    SELECT key.action_id, $1::text, $2::text, $3::text, $4::text, $5::text, $6::bytea,
           $7::boolean, $8::boolean, $9::text, $10::integer, $11::jsonb, $12::text,
           coalesce($13::timestamptz, now()), $14::timestamptz
      FROM key
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
