-- Due depth and oldest due age per kind, for the gauges. Reads only the due index's rows, but
-- counts them all, so the executor runs it on its own slow interval.
-- $1 timestamptz: "now" for tests; NULL means the database clock.
SELECT kind, count(*) AS due,
       extract(epoch FROM (coalesce($1::timestamptz, now()) - min(run_at)))::float8 AS oldest_s
  FROM wharf.action_live
 WHERE state = 'ADMITTED' AND run_at <= coalesce($1::timestamptz, now())
 GROUP BY kind
