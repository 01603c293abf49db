-- The insert ceiling (bench/README.md): one single-row INSERT, committed on its own. The floor
-- under one unbatched enqueue: wharf's enqueue also writes one row and one commit, plus its
-- idempotency check and indexes. Table: wharf_ceiling.enqueued (setup.sql).
INSERT INTO wharf_ceiling.enqueued (lane_key, payload) VALUES ('lane-' || :client_id, '{}');
