-- wharf's own schema. sqlx creates it before this runs (Migrator::create_schema); this file
-- records the comment and keeps the numbering: 0002 is the outbox, 0003 the inbox.
COMMENT ON SCHEMA wharf IS 'wharf: durable outbox and signed-envelope inbox';
