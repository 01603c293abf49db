-- Why a fence refused: the action's current epoch, state and lease left (NULL row: deleted).
-- $1 bigint: action id. $2 timestamptz: "now" for tests; NULL means the database clock.
SELECT epoch, state,
       (extract(epoch FROM (lease_expires_at - coalesce($2::timestamptz, now()))) * 1000)::bigint
           AS lease_left_ms
  FROM wharf.action
 WHERE id = $1
