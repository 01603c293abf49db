-- Vacuums the live table (live_dead_rows.sql says why), skipped at once if another vacuum holds
-- it (an autovacuum, or another replica's). Not in a transaction: VACUUM cannot run in one.
-- The indexes are cleaned even when few heap pages have dead rows: the due index's dead front
-- is what this vacuum is for, and PostgreSQL would otherwise skip index cleanup below 2 %.
VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) wharf.action_live
