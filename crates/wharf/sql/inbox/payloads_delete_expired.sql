-- Payload retention: deletes at most $2 payloads stored before $1. It names only the payload
-- table, so identities, idempotency keys, cursors, floors and audit stay and an expired event
-- can never become new again. SKIP LOCKED lets several retention runs share the work.
DELETE FROM wharf.inbox_payloads
WHERE identity_id IN (SELECT identity_id
                      FROM wharf.inbox_payloads
                      WHERE stored_at < $1
                      ORDER BY stored_at
                      LIMIT $2
                      FOR UPDATE SKIP LOCKED)
