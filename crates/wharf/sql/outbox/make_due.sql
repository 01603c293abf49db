-- drain(): every waiting ADMITTED action becomes due now (ADMITTED -> ADMITTED).
-- $1 timestamptz: "now" for tests; NULL means the database clock.
UPDATE wharf.action_live
   SET run_at = coalesce($1::timestamptz, now())
 WHERE state = 'ADMITTED' AND run_at > coalesce($1::timestamptz, now())
