-- claim_complete_batch.sql on the HOT model (hot_setup.sql): claim :batch due actions (take
-- them off `ready`, lease their lanes in `running`, raise epoch and attempt on the row, the
-- claim's commit as the fence), then complete them under their epochs (free the lanes, end the
-- rows without their payload). One run of this script = :batch actions drained, so jobs/s =
-- tps × batch. A step that does not touch exactly :batch rows returns no row into \gset and
-- aborts the client, as in the in-place script.

-- 1. Claim :batch due rows in one statement.
WITH picked AS (
    SELECT r.ctid AS row_id, r.id, r.lane_key
      FROM wharf_hot.ready r
     WHERE r.run_at <= now()
     ORDER BY r.run_at, r.id
     LIMIT :batch
       FOR UPDATE SKIP LOCKED
),
taken AS (
    DELETE FROM wharf_hot.ready r USING picked p WHERE r.ctid = p.row_id
),
leased AS (
    INSERT INTO wharf_hot.running (lane_key, id, epoch, lease_expires_at)
    SELECT p.lane_key, p.id, 1, now() + interval '5 minutes' FROM picked p
),
claimed AS (
    UPDATE wharf_hot.action a
       SET state = 'EXECUTING',
           epoch = a.epoch + 1,
           attempt = a.attempt + 1,
           lease_expires_at = now() + interval '5 minutes',
           write_started_at = coalesce(a.write_started_at, now())
     WHERE a.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING a.id, a.epoch, a.lane_key
)
SELECT array_agg(id) AS claimed_ids, array_agg(epoch) AS claimed_epochs,
       array_agg(lane_key) AS claimed_lanes
  FROM claimed
HAVING count(*) = :batch
\gset

-- 2. Complete them, each under its own epoch, in one statement.
WITH freed AS (
    DELETE FROM wharf_hot.running WHERE lane_key = ANY (:claimed_lanes::text[])
),
completed AS (
    UPDATE wharf_hot.action a
       SET state = 'DONE',
           payload = NULL,
           lease_expires_at = NULL,
           ended_at = now()
      FROM unnest(:claimed_ids::bigint[], :claimed_epochs::bigint[]) AS r(id, epoch)
     WHERE a.id = r.id AND a.epoch = r.epoch AND a.state = 'EXECUTING'
    RETURNING a.id
)
SELECT count(*) AS completed_count FROM completed HAVING count(*) = :batch
\gset
