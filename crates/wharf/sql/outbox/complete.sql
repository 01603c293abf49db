-- Records the results of many attempts in one statement. Every row is fenced by (id, epoch): a
-- row whose claim was superseded, or that erasure deleted, is not returned, and the caller
-- reports that attempt as Abandoned. An attempt sent back to ADMITTED (a retry, a deferral)
-- updates its live row; an ended one moves: deleted from wharf.action_live under the same
-- fence and inserted into wharf.action_ended without its payload (0060).
-- Arrays, one entry per attempt:
-- $1 bigint[] id, $2 bigint[] epoch, $3 text[] next state (ADMITTED or an ended state),
-- $4 text[] stop reason (NULL unless ended), $5 text[] readback ref, $6 text[] error code,
-- $7 bigint[] delay in ms before the next attempt (ADMITTED only),
-- $8 integer[] attempts to give back (1 for a deferral, which does not count),
-- $9 boolean[] clear write_started_at (the adapter proved nothing was written).
-- $10 timestamptz: "now" for tests; NULL means the database clock.
--
-- The plan, fixed by the text: the primary key finds each part's rows (`a.id = ANY` the ids
-- that part names, the released ones for the UPDATE, the ended ones for the DELETE), and they
-- are joined to the arrays by hash. The state test is a CASE on purpose: no partial index on
-- EXECUTING rows can serve it, and the planner estimates it at one half instead of believing the
-- statistics. Statistics taken while every row was ADMITTED (a bench's ANALYZE after enqueue,
-- any quiet moment) say almost nothing is EXECUTING; believing them, the planner walked
-- ux_action_lane_executing (every running action and every dead entry it had left), or took the
-- batch's rows as one and compared each with every entry of the arrays (15-20 ms for 200 rows
-- instead of 4; completions of seconds, a p50 of 25 s on a server with default settings), or
-- hashed the arrays and scanned the whole table. tests/it/outbox/plans.rs holds the plan to this.
WITH clock AS MATERIALIZED (
    SELECT coalesce($10::timestamptz, now()) AS now
),
r AS MATERIALIZED (
    SELECT *
      FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
                  $7::bigint[], $8::integer[], $9::boolean[])
           AS r(id, epoch, state, stop_reason, readback_ref, error_code, delay_ms, refund,
                clear_fence)
),
released AS (
    UPDATE wharf.action_live a
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
    DELETE FROM wharf.action_live a
     USING r
     WHERE a.id = ANY(ARRAY(SELECT x.id FROM r x WHERE x.state <> 'ADMITTED'))
       AND a.id = r.id AND a.epoch = r.epoch AND r.state <> 'ADMITTED'
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
    INSERT INTO wharf.action_ended (id, kind, tenant_id, project_id, lane_key, idempotency_key,
                                    content_digest, at_most_once, instance_level, state,
                                    stop_reason, epoch, attempt, max_attempts,
                                    subject_account_id, run_at, expires_at, write_started_at,
                                    readback_ref, error_code, created_at, ended_at)
    SELECT g.id, g.kind, g.tenant_id, g.project_id, g.lane_key, g.idempotency_key,
           g.content_digest, g.at_most_once, g.instance_level, g.end_state, g.end_reason,
           g.epoch, g.attempt - g.refund, g.max_attempts, g.subject_account_id, g.run_at,
           g.expires_at, CASE WHEN g.clear_fence THEN NULL ELSE g.write_started_at END,
           coalesce(g.new_readback_ref, g.readback_ref), g.new_error_code, g.created_at,
           clock.now
      FROM gone g, clock
    RETURNING id
)
SELECT id FROM released
UNION ALL
SELECT id FROM ended
