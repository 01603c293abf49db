-- The hot design (model_setup.sql, wharf_model.hot_live, hot_ready, hot_running, with moved's
-- ended and action_key): model_moved.sql's drain with the claim a HOT update of the live row.
-- up to :batch actions end to end per pgbench transaction. Three database transactions:
-- enqueue (key rows, live rows and their head candidates in one statement), claim (claim.sql's
-- shape: the window read from hot_ready instead of ix_action_due, the claimed candidates deleted
-- from it, the lanes entered into hot_running, the live rows updated in place of their page),
-- complete (one statement: DELETE the batch from live, fenced by id and epoch, INSERT it into
-- ended, free the lanes in hot_running; a release back to ADMITTED, none here, stays an UPDATE
-- of live and puts the row back in hot_ready). Same values written in and the same omissions as
-- the other two designs.
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
    INSERT INTO wharf_model.hot_live (id, kind, tenant_id, project_id, lane_key,
                                      idempotency_key, content_digest, at_most_once,
                                      instance_level, state, max_attempts, payload,
                                      subject_account_id, run_at, expires_at)
    SELECT DISTINCT ON (i.idempotency_key)
           k.action_id, i.kind, i.tenant_id, i.project_id, i.lane_key, i.idempotency_key,
           i.content_digest, i.at_most_once, i.instance_level, i.state, i.max_attempts,
           i.payload, i.subject_account_id, coalesce(i.run_at, now()), i.expires_at
      FROM keys k
      JOIN input i ON i.idempotency_key = k.idempotency_key
     ORDER BY i.idempotency_key, i.ord
    RETURNING id, kind, lane_key, state, run_at
),
-- Every new ADMITTED row is a head candidate, as enqueue.sql sets head_hint today; the claim's
-- probes decide exactly, demotion takes out the blocked ones.
ready AS (
    INSERT INTO wharf_model.hot_ready (id, kind, run_at, lane_key)
    SELECT id, kind, run_at, lane_key FROM ins WHERE state = 'ADMITTED'
)
SELECT count(*) AS enqueued FROM ins HAVING count(*) = :batch
\gset
\endif

-- 2. Claim :batch due lane heads (claim.sql's shape on the hot layout).
-- Reclaims walk hot_running in lease order and look each row up by primary key (a LATERAL
-- join, so the shape is fixed): joined as two tables, a generic plan made on the churned
-- hot_running chose a sequential scan of hot_live (67 ms a claim), and by the time the heads were
-- locked the other clients had drained the whole window: claims came back empty.
WITH reclaims AS (
    SELECT r.id, r.lane_key, r.was_started
      FROM wharf_model.hot_running x
     CROSS JOIN LATERAL (
            SELECT r.id, r.lane_key, r.write_started_at IS NOT NULL AS was_started
              FROM wharf_model.hot_live r
             WHERE r.id = x.id
               AND (r.state || '') = 'EXECUTING'
               AND r.kind = ANY('{email.send}'::text[])
               AND NOT (r.at_most_once AND r.write_started_at IS NOT NULL)
               AND r.attempt < r.max_attempts
               FOR UPDATE SKIP LOCKED
          ) r
     WHERE x.lease_expires_at <= (SELECT now())
     ORDER BY x.lease_expires_at
     LIMIT :batch
),
candidates AS MATERIALIZED (
    SELECT c.id, c.ctid AS ready_row
      FROM wharf_model.hot_ready c
     WHERE c.run_at <= (SELECT now())
       AND c.kind = ANY('{email.send}'::text[])
     ORDER BY c.run_at, c.id
     LIMIT :scan
),
-- The filters the window read from the row today (expiry, an at-most-once write started) move
-- to the look-up of the row, which reads the row anyway.
heads AS (
    SELECT h.id, h.lane_key, h.was_started, c.ready_row
      FROM candidates c
     CROSS JOIN LATERAL (
            SELECT h.id, h.lane_key, h.write_started_at IS NOT NULL AS was_started
              FROM wharf_model.hot_live h
             WHERE h.id = c.id AND (h.state || '') = 'ADMITTED'
               AND (h.expires_at IS NULL OR h.expires_at > (SELECT now())
                    OR h.write_started_at IS NOT NULL)
               AND NOT (h.at_most_once AND h.write_started_at IS NOT NULL)
               AND (SELECT 1 FROM wharf_model.hot_running e
                     WHERE e.lane_key = h.lane_key LIMIT 1) IS NULL
               AND (SELECT 1 FROM wharf_model.hot_live p
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
taken AS (
    DELETE FROM wharf_model.hot_ready r
     WHERE r.ctid = ANY (ARRAY(SELECT ready_row FROM heads))
),
leased AS (
    INSERT INTO wharf_model.hot_running (lane_key, id, lease_expires_at)
    SELECT lane_key, id, (SELECT now()) + 300000::bigint * interval '1 millisecond' FROM heads
),
relet AS (
    UPDATE wharf_model.hot_running x
       SET lease_expires_at = (SELECT now()) + 300000::bigint * interval '1 millisecond'
     WHERE x.lane_key = ANY (ARRAY(SELECT lane_key FROM reclaims))
),
claimed AS (
    UPDATE wharf_model.hot_live a
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

-- 3. Complete them all DONE: out of live, into ended, the lanes freed, in one statement.
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
    UPDATE wharf_model.hot_live a
       SET state = 'ADMITTED',
           readback_ref = coalesce(r.readback_ref, a.readback_ref),
           error_code = r.error_code,
           attempt = a.attempt - r.refund,
           run_at = clock.now + r.delay_ms * interval '1 millisecond',
           lease_expires_at = NULL,
           write_started_at = CASE WHEN r.clear_fence THEN NULL ELSE a.write_started_at END
      FROM r, clock
     WHERE a.id = ANY(ARRAY(SELECT x.id FROM r x WHERE x.state = 'ADMITTED'))
       AND a.id = r.id AND a.epoch = r.epoch AND r.state = 'ADMITTED'
       AND CASE WHEN a.state = 'EXECUTING' THEN true ELSE false END
    RETURNING a.id, a.kind, a.run_at, a.lane_key
),
requeued AS (
    INSERT INTO wharf_model.hot_ready (id, kind, run_at, lane_key)
    SELECT id, kind, run_at, lane_key FROM released
),
gone AS (
    DELETE FROM wharf_model.hot_live a
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
freed AS (
    DELETE FROM wharf_model.hot_running x
     WHERE x.lane_key = ANY (ARRAY(SELECT lane_key FROM gone UNION ALL SELECT lane_key FROM released))
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
