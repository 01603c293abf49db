-- The newest $1 ingest answers (at most) of the inbox audit, by minute, outcome and reason,
-- read backwards along its primary key: bounded by $1 whatever the table's size.
SELECT date_trunc('minute', recorded_at) AS minute, outcome, reason, count(*) AS n
FROM (SELECT recorded_at, outcome, reason FROM wharf.inbox_audit
      WHERE action = 'ingest'
      ORDER BY audit_id DESC LIMIT $1) recent
GROUP BY 1, 2, 3
ORDER BY 1
