-- Due lane heads per kind with the oldest due time: the first $1 rows of the due index
-- (ix_action_due, in run_at order), so the oldest is exact for every kind found and the count
-- is a lower bound when $1 rows were read. $2 timestamptz "now" (NULL: the database clock).
SELECT kind, count(*) AS due, min(run_at) AS oldest_run_at
FROM (SELECT kind, run_at
      FROM wharf.action_live
      WHERE state = 'ADMITTED' AND head_hint AND run_at <= coalesce($2::timestamptz, now())
      ORDER BY run_at, id
      LIMIT $1) due
GROUP BY kind
ORDER BY kind
