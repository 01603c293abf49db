-- The inplace design (model_setup.sql, wharf_model.action): up to :batch actions drained end to
-- end per pgbench transaction, with wharf's own statements (model.sh turns what ended into jobs/s).
-- Three database transactions, as wharf runs them: enqueue (enqueue.sql), claim (claim.sql,
-- the claim as the fence, as wharf's executor runs a kind that is not at-most-once), complete
-- (complete.sql, every attempt DONE). Values wharf binds are written in: kinds {email.send},
-- lease 300000 ms, the database clock, a window of :scan head candidates.
-- Left out: enqueue's NOTIFY wake-up (pg_notify under an advisory lock), and the claim's columns
-- reaching the client (they are computed; only ids and epochs are returned).
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
      JOIN wharf_model.action a ON a.idempotency_key = i.idempotency_key
     WHERE a.content_digest <> i.content_digest
     LIMIT 1
),
ins AS (
    INSERT INTO wharf_model.action (kind, tenant_id, project_id, lane_key, idempotency_key,
                                    content_digest, at_most_once, instance_level, state,
                                    max_attempts, payload, subject_account_id, run_at, expires_at)
    SELECT kind, tenant_id, project_id, lane_key, idempotency_key, content_digest,
           at_most_once, instance_level, state, max_attempts, payload, subject_account_id,
           coalesce(run_at, now()), expires_at
      FROM input
     WHERE NOT EXISTS (SELECT 1 FROM conflict)
     ORDER BY ord
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id, idempotency_key, state, run_at
)
SELECT count(*) AS enqueued FROM ins HAVING count(*) = :batch
\gset
\endif

-- 2. Claim :batch due lane heads (claim.sql).
WITH reclaims AS (
    SELECT r.id, r.write_started_at IS NOT NULL AS was_started
      FROM wharf_model.action r
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
      FROM wharf_model.action c
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
              FROM wharf_model.action h
             WHERE h.id = c.id AND (h.state || '') = 'ADMITTED'
               AND (SELECT 1 FROM wharf_model.action e
                     WHERE e.lane_key = h.lane_key AND e.state = 'EXECUTING'
                     ORDER BY e.lane_key LIMIT 1) IS NULL
               AND (SELECT 1 FROM wharf_model.action p
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
    UPDATE wharf_model.action a
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

-- 3. Complete them all DONE (complete.sql, its arrays built here).
WITH clock AS MATERIALIZED (
    SELECT now() AS now
),
completed AS (
UPDATE wharf_model.action a
   SET state = r.state,
       stop_reason = r.stop_reason,
       readback_ref = coalesce(r.readback_ref, a.readback_ref),
       error_code = r.error_code,
       attempt = a.attempt - r.refund,
       run_at = CASE WHEN r.state = 'ADMITTED'
                     THEN clock.now + r.delay_ms * interval '1 millisecond'
                     ELSE a.run_at END,
       lease_expires_at = NULL,
       write_started_at = CASE WHEN r.clear_fence THEN NULL ELSE a.write_started_at END,
       head_hint = (r.state = 'ADMITTED') OR a.head_hint,
       payload = CASE WHEN r.state = 'ADMITTED' THEN a.payload ELSE NULL END,
       ended_at = CASE WHEN r.state = 'ADMITTED' THEN NULL ELSE clock.now END
  FROM unnest(:claimed_ids::bigint[], :claimed_epochs::bigint[],
              array_fill('DONE'::text, ARRAY[:claimed_count::integer]),
              array_fill('DONE'::text, ARRAY[:claimed_count::integer]),
              array_fill(NULL::text, ARRAY[:claimed_count::integer]),
              array_fill(NULL::text, ARRAY[:claimed_count::integer]),
              array_fill(0::bigint, ARRAY[:claimed_count::integer]),
              array_fill(0::integer, ARRAY[:claimed_count::integer]),
              array_fill(false, ARRAY[:claimed_count::integer]))
           AS r(id, epoch, state, stop_reason, readback_ref, error_code, delay_ms, refund,
                clear_fence),
       clock
 WHERE a.id = ANY(:claimed_ids::bigint[]) AND a.id = r.id AND a.epoch = r.epoch
   AND CASE WHEN a.state = 'EXECUTING' THEN true ELSE false END
RETURNING a.id
)
SELECT count(*) AS completed_count FROM completed HAVING count(*) = :claimed_count
\gset
