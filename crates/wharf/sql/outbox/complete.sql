-- Records the results of many attempts in one statement. Every row is fenced by (id, epoch): a
-- row whose claim was superseded, or that erasure deleted, is not returned, and the caller
-- reports that attempt as Abandoned.
-- Arrays, one entry per attempt:
-- $1 bigint[] id, $2 bigint[] epoch, $3 text[] next state (ADMITTED or an ended state),
-- $4 text[] stop reason (NULL unless ended), $5 text[] readback ref, $6 text[] error code,
-- $7 bigint[] delay in ms before the next attempt (ADMITTED only),
-- $8 integer[] attempts to give back (1 for a deferral, which does not count),
-- $9 boolean[] clear write_started_at (the adapter proved nothing was written).
-- $10 timestamptz: "now" for tests; NULL means the database clock.
--
-- The plan, fixed by the text: the primary key finds the batch's rows (`a.id = ANY($1)`), and
-- they are joined to the arrays by hash. The state test is a CASE on purpose: no partial index on
-- EXECUTING rows can serve it, and the planner estimates it at one half instead of believing the
-- statistics. Statistics taken while every row was ADMITTED (a bench's ANALYZE after enqueue,
-- any quiet moment) say almost nothing is EXECUTING; believing them, the planner walked
-- ux_action_lane_executing (every running action and every dead entry it had left), or took the
-- batch's rows as one and compared each with every entry of the arrays (15-20 ms for 200 rows
-- instead of 4; completions of seconds, a p50 of 25 s on a server with default settings), or
-- hashed the arrays and scanned the whole table. tests/it/outbox/plans.rs holds the plan to this.
WITH clock AS MATERIALIZED (
    SELECT coalesce($10::timestamptz, now()) AS now
)
UPDATE wharf.action a
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
  FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
              $7::bigint[], $8::integer[], $9::boolean[])
           AS r(id, epoch, state, stop_reason, readback_ref, error_code, delay_ms, refund,
                clear_fence),
       clock
 WHERE a.id = ANY($1::bigint[]) AND a.id = r.id AND a.epoch = r.epoch
   AND CASE WHEN a.state = 'EXECUTING' THEN true ELSE false END
RETURNING a.id
