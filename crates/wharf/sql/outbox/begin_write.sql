-- The fence (SPEC §2.3): records that the provider call is about to start, in its own short
-- transaction, only when this claim still holds the action with at least the fence margin of
-- lease left. Zero rows means refused: another claim took it, erasure deleted it, or the lease
-- is too short. The first start time is kept, so a second call changes nothing.
-- $1 bigint: action id. $2 bigint: the claim's epoch. $3 bigint: fence margin in milliseconds.
-- $4 timestamptz: "now" for tests; NULL means the database clock.
UPDATE wharf.action
   SET write_started_at = coalesce(write_started_at, coalesce($4::timestamptz, now()))
 WHERE id = $1 AND epoch = $2 AND state = 'EXECUTING'
   AND lease_expires_at - coalesce($4::timestamptz, now()) >= $3::bigint * interval '1 millisecond'
RETURNING id
