-- A page of actions in id order, strictly after a cursor, optionally narrowed by state, kind
-- and tenant (operator listing: `wharf actions list`). Walks the primary keys of the live and
-- the ended table in id order, so a page costs at most the rows it skips; a state filter reads
-- only the table that can hold the state (the branch the other needs is cut by a condition on
-- the parameter alone, decided once per execution). Narrow filters over big tables are an
-- operator's patience, not a request path.
-- $1 text state, $2 text kind, $3 text tenant (each NULL: any), $4 bigint after id (NULL: from
-- the start), $5 integer rows (≤ 100).
SELECT *
  FROM ((SELECT id, kind, tenant_id, project_id, lane_key, idempotency_key, content_digest,
                at_most_once, instance_level, state, NULL::text AS stop_reason, epoch, attempt,
                max_attempts, payload, subject_account_id, run_at, expires_at,
                lease_expires_at, write_started_at, readback_ref, error_code, created_at,
                NULL::timestamptz AS ended_at
           FROM wharf.action_live
          WHERE ($1::text IS NULL OR $1::text IN ('PROPOSED', 'ADMITTED', 'EXECUTING'))
            AND ($1::text IS NULL OR state = $1)
            AND ($2::text IS NULL OR kind = $2)
            AND ($3::text IS NULL OR tenant_id = $3)
            AND id > coalesce($4::bigint, 0)
          ORDER BY id
          LIMIT $5)
        UNION ALL
        (SELECT id, kind, tenant_id, project_id, lane_key, idempotency_key, content_digest,
                at_most_once, instance_level, state, stop_reason, epoch, attempt, max_attempts,
                NULL::jsonb AS payload, subject_account_id, run_at, expires_at,
                NULL::timestamptz AS lease_expires_at, write_started_at, readback_ref,
                error_code, created_at, ended_at
           FROM wharf.action_ended
          WHERE ($1::text IS NULL OR $1::text NOT IN ('PROPOSED', 'ADMITTED', 'EXECUTING'))
            AND ($1::text IS NULL OR state = $1)
            AND ($2::text IS NULL OR kind = $2)
            AND ($3::text IS NULL OR tenant_id = $3)
            AND id > coalesce($4::bigint, 0)
          ORDER BY id
          LIMIT $5)) page
 ORDER BY id
 LIMIT $5
