-- Attempts by minute over the last hour, as far as the rows can tell. wharf keeps no row per
-- attempt: an action holds only its attempt count and the time its latest provider call started
-- (write_started_at, marked by the claim for claim-fenced kinds, by the fence otherwise). So an
-- attempt is counted here once, at the minute its call started, for
--   * the newest $1 actions that ended in the last hour (read backwards along ix_action_ended,
--     the window ended_by_minute.sql reads), whose last attempt ended with them; one whose last
--     attempt ended before its call (a refusal, a retry decided before the fence) is counted at
--     its end;
--   * up to $1 executing actions (read along ix_action_lease, which holds exactly the running
--     ones), once their call has started.
-- Not counted, because no time of theirs is kept: earlier attempts of a retried action, and the
-- attempt of an action now waiting for its retry. Both reads are bounded by $1, so the cost does
-- not grow with the table. $2 timestamptz "now" for tests (NULL: the database clock).
SELECT date_trunc('minute', at) AS minute, count(*) AS n
FROM (
    (SELECT coalesce(write_started_at, ended_at) AS at, attempt
     FROM wharf.action_ended
     WHERE ended_at IS NOT NULL
       AND ended_at > coalesce($2::timestamptz, now()) - interval '1 hour'
     ORDER BY ended_at DESC
     LIMIT $1)
    UNION ALL
    (SELECT write_started_at AS at, attempt
     FROM wharf.action_live
     WHERE lease_expires_at IS NOT NULL
       AND state = 'EXECUTING'
     ORDER BY lease_expires_at DESC
     LIMIT $1)
) recent
WHERE attempt > 0
  AND at > coalesce($2::timestamptz, now()) - interval '1 hour'
GROUP BY 1
ORDER BY 1
