-- The moved design (model_setup.sql, wharf_model.live, ended, action_key): model_inplace.sql's
-- drain, statement for statement, against live actions in their own table. Up to :batch actions
-- end to end per pgbench transaction. Three database transactions:
-- enqueue (the key rows and the live rows in one statement; the digest check and ON CONFLICT on
-- action_key, the one index that decides a key's uniqueness over live and ended), claim
-- (claim.sql on live, unchanged), complete (one statement: DELETE the batch from live, fenced by
-- id and epoch, and INSERT the deleted rows into ended; a release back to ADMITTED, none here,
-- stays an UPDATE of live in the same statement). Same values written in, same omissions (the
-- NOTIFY wake-up; the claim's columns are computed, only ids and epochs reach the client).
-- The enqueue must write exactly :batch rows and the completion end exactly what the claim
-- took, or the step returns no row into \gset and aborts the client. A claim may come back
-- short (other clients hold or have just taken rows of its window): model.sh counts what ended.

-- 1. Enqueue :batch actions: a random key and a lane of its own each.
-- Skipped with -D enqueue=0 (model.sh --drain): then the scripts drain a prefilled backlog.
\if :enqueue
WITH gen AS MATERIALIZED (
    SELECT g AS ord, gen_random_uuid()::text AS u FROM generate_series(1, :batch) AS g
),
input AS (
    SELECT ord, 'email.send' AS kind, 'tenant-1' AS tenant_id, 'project-1' AS project_id,
           'lane-' || u AS lane_key, 'key-' || u AS idempotency_key,
           sha256(convert_to(u, 'UTF8')) AS content_digest, false AS at_most_once,
           false AS instance_level, 'ADMITTED' AS state, 5 AS max_attempts,
           jsonb_build_object('to', 'user-' || u || '@example.com', 'template', 'welcome',
                              'locale', 'en',
                              'vars', '{"name": "Ada Lovelace", "plan": "pro", "trial_days": 14}'::jsonb)
               AS payload,
           NULL::text AS subject_account_id, NULL::timestamptz AS run_at,
           NULL::timestamptz AS expires_at
      FROM gen
),
conflict AS (
    SELECT 1
      FROM input i
      JOIN wharf_model.action_key k ON k.idempotency_key = i.idempotency_key
     WHERE k.content_digest <> i.content_digest
     LIMIT 1
),
keys AS (
    INSERT INTO wharf_model.action_key (idempotency_key, content_digest)
    SELECT idempotency_key, content_digest
      FROM input
     WHERE NOT EXISTS (SELECT 1 FROM conflict)
     ORDER BY ord
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING idempotency_key, action_id
),
ins AS (
    INSERT INTO wharf_model.live (id, kind, tenant_id, project_id, lane_key, idempotency_key,
                                  content_digest, at_most_once, instance_level, state,
                                  max_attempts, payload, subject_account_id, run_at, expires_at)
    SELECT DISTINCT ON (i.idempotency_key)
           k.action_id, i.kind, i.tenant_id, i.project_id, i.lane_key, i.idempotency_key,
           i.content_digest, i.at_most_once, i.instance_level, i.state, i.max_attempts,
           i.payload, i.subject_account_id, coalesce(i.run_at, now()), i.expires_at
      FROM keys k
      JOIN input i ON i.idempotency_key = k.idempotency_key
     ORDER BY i.idempotency_key, i.ord
    RETURNING id, idempotency_key, state, run_at
)
SELECT count(*) AS enqueued FROM ins HAVING count(*) = :batch
\gset
\endif

-- 2. Claim :batch due lane heads (claim.sql, on live).
WITH reclaims AS (
    SELECT r.id, r.write_started_at IS NOT NULL AS was_started
      FROM wharf_model.live r
     WHERE r.lease_expires_at IS NOT NULL
       AND r.lease_expires_at <= (SELECT now())
       AND (r.state || '') = 'EXECUTING'
       AND r.kind = ANY('{email.send}'::text[])
       AND NOT (r.at_most_once AND r.write_started_at IS NOT NULL)
       AND r.attempt < r.max_attempts
     ORDER BY r.lease_expires_at
     LIMIT :batch
       FOR UPDATE SKIP LOCKED
),
candidates AS MATERIALIZED (
    SELECT c.id
      FROM wharf_model.live c
     WHERE c.state = 'ADMITTED' AND c.head_hint
       AND c.run_at <= (SELECT now())
       AND c.kind = ANY('{email.send}'::text[])
       AND (c.expires_at IS NULL OR c.expires_at > (SELECT now())
            OR c.write_started_at IS NOT NULL)
       AND NOT (c.at_most_once AND c.write_started_at IS NOT NULL)
     ORDER BY c.run_at, c.id
     LIMIT :scan
),
heads AS (
    SELECT h.id, h.was_started
      FROM candidates c
     CROSS JOIN LATERAL (
            SELECT h.id, h.write_started_at IS NOT NULL AS was_started
              FROM wharf_model.live h
             WHERE h.id = c.id AND (h.state || '') = 'ADMITTED'
               AND (SELECT 1 FROM wharf_model.live e
                     WHERE e.lane_key = h.lane_key AND e.state = 'EXECUTING'
                     ORDER BY e.lane_key LIMIT 1) IS NULL
               AND (SELECT 1 FROM wharf_model.live p
                     WHERE (p.lane_key, p.id) < (h.lane_key, h.id) AND p.lane_key >= h.lane_key
                       AND p.state IN ('PROPOSED', 'ADMITTED')
                     ORDER BY p.lane_key DESC, p.id DESC LIMIT 1) IS NULL
               FOR UPDATE SKIP LOCKED
          ) h
     LIMIT greatest(:batch - (SELECT count(*) FROM reclaims), 0)
),
picked AS (
    SELECT id, was_started FROM reclaims
    UNION ALL
    SELECT id, was_started FROM heads
),
claimed AS (
    UPDATE wharf_model.live a
       SET state = 'EXECUTING',
           epoch = a.epoch + 1,
           attempt = a.attempt + 1,
           lease_expires_at = (SELECT now()) + 300000::bigint * interval '1 millisecond',
           write_started_at = CASE WHEN a.kind = ANY('{email.send}'::text[]) AND NOT a.at_most_once
                                   THEN coalesce(a.write_started_at, (SELECT now()))
                                   ELSE a.write_started_at END
     WHERE a.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING a.id, a.kind, a.tenant_id, a.project_id, a.lane_key, a.idempotency_key, a.payload,
              a.subject_account_id, a.attempt, a.max_attempts, a.epoch, a.created_at,
              a.id = ANY (ARRAY(SELECT id FROM picked WHERE was_started)) AS write_started,
              (a.kind = ANY('{email.send}'::text[]) AND NOT a.at_most_once) AS claim_fenced
)
SELECT coalesce(array_agg(id), '{}') AS claimed_ids,
       coalesce(array_agg(epoch), '{}') AS claimed_epochs, count(*) AS claimed_count
  FROM claimed
\gset

-- 3. Complete them all DONE: out of live, into ended, in one statement.
WITH clock AS MATERIALIZED (
    SELECT now() AS now
),
r AS MATERIALIZED (
    SELECT *
      FROM unnest(:claimed_ids::bigint[], :claimed_epochs::bigint[],
                  array_fill('DONE'::text, ARRAY[:claimed_count::integer]),
                  array_fill('DONE'::text, ARRAY[:claimed_count::integer]),
                  array_fill(NULL::text, ARRAY[:claimed_count::integer]),
                  array_fill(NULL::text, ARRAY[:claimed_count::integer]),
                  array_fill(0::bigint, ARRAY[:claimed_count::integer]),
                  array_fill(0::integer, ARRAY[:claimed_count::integer]),
                  array_fill(false, ARRAY[:claimed_count::integer]))
           AS r(id, epoch, state, stop_reason, readback_ref, error_code, delay_ms, refund,
                clear_fence)
),
released AS (
    UPDATE wharf_model.live a
       SET state = 'ADMITTED',
           readback_ref = coalesce(r.readback_ref, a.readback_ref),
           error_code = r.error_code,
           attempt = a.attempt - r.refund,
           run_at = clock.now + r.delay_ms * interval '1 millisecond',
           lease_expires_at = NULL,
           write_started_at = CASE WHEN r.clear_fence THEN NULL ELSE a.write_started_at END,
           head_hint = true
      FROM r, clock
     WHERE a.id = ANY(ARRAY(SELECT x.id FROM r x WHERE x.state = 'ADMITTED'))
       AND a.id = r.id AND a.epoch = r.epoch AND r.state = 'ADMITTED'
       AND CASE WHEN a.state = 'EXECUTING' THEN true ELSE false END
    RETURNING a.id
),
gone AS (
    DELETE FROM wharf_model.live a
     USING r
     WHERE a.id = ANY(:claimed_ids::bigint[]) AND a.id = r.id AND a.epoch = r.epoch
       AND r.state <> 'ADMITTED'
       AND CASE WHEN a.state = 'EXECUTING' THEN true ELSE false END
    RETURNING a.id, a.kind, a.tenant_id, a.project_id, a.lane_key, a.idempotency_key,
              a.content_digest, a.at_most_once, a.instance_level, a.epoch, a.attempt,
              a.max_attempts, a.subject_account_id, a.run_at, a.expires_at, a.write_started_at,
              a.readback_ref, a.created_at,
              r.state AS end_state, r.stop_reason AS end_reason,
              r.readback_ref AS new_readback_ref, r.error_code AS new_error_code, r.refund,
              r.clear_fence
),
ended AS (
    INSERT INTO wharf_model.ended (id, kind, tenant_id, project_id, lane_key, idempotency_key,
                                   content_digest, at_most_once, instance_level, state,
                                   stop_reason, epoch, attempt, max_attempts, subject_account_id,
                                   run_at, expires_at, write_started_at, readback_ref, error_code,
                                   created_at, ended_at)
    SELECT g.id, g.kind, g.tenant_id, g.project_id, g.lane_key, g.idempotency_key,
           g.content_digest, g.at_most_once, g.instance_level, g.end_state, g.end_reason,
           g.epoch, g.attempt - g.refund, g.max_attempts, g.subject_account_id, g.run_at,
           g.expires_at, CASE WHEN g.clear_fence THEN NULL ELSE g.write_started_at END,
           coalesce(g.new_readback_ref, g.readback_ref), g.new_error_code, g.created_at,
           clock.now
      FROM gone g, clock
    RETURNING id
)
SELECT n AS completed_count
  FROM (SELECT (SELECT count(*) FROM ended) + (SELECT count(*) FROM released) AS n) c
 WHERE n = :claimed_count
\gset
