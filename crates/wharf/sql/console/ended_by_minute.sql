-- Actions that ended in the last hour, by minute, state, stop reason and kind: the newest $1
-- ends at most, read backwards along ix_action_ended, so the cost is bounded by $1 however fast
-- actions end. $2 timestamptz "now" for tests (NULL: the database clock).
SELECT date_trunc('minute', ended_at) AS minute, state, stop_reason, kind, count(*) AS n
FROM (SELECT ended_at, state, stop_reason, kind
      FROM wharf.action_ended
      WHERE ended_at IS NOT NULL
        AND ended_at > coalesce($2::timestamptz, now()) - interval '1 hour'
      ORDER BY ended_at DESC
      LIMIT $1) recent
GROUP BY 1, 2, 3, 4
ORDER BY 1
