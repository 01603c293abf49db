-- Dead row versions in wharf.action_live since its last vacuum, its live rows, and whether this
-- role may vacuum it: as its owner (or a member), the database's owner, or a superuser. VACUUM
-- skips, with a warning, a table the role may not vacuum.
--
-- Every claim leaves a dead version of the row it updates and every ending a deleted row. Their
-- entries stay in the due index (ix_action_due) until a vacuum removes them, and every claim's
-- walk in run_at order steps over all of them before it finds a due row: a claim of 100 cost
-- 0.8 ms more after 30,000 claims and 3.7 ms more after 210,000 (BENCHMARKS.md, "The due
-- index's dead front"). Autovacuum comes at most once a minute, too late at thousands a second.
-- The counts are the statistics system's: the server gathers them from every replica's
-- statements, a second or so late, and resets the dead count when any vacuum ends.
SELECT coalesce(s.n_dead_tup, 0) AS dead_rows,
       coalesce(s.n_live_tup, 0) AS live_rows,
       pg_has_role(current_user, c.relowner, 'USAGE')
           OR (SELECT pg_has_role(current_user, d.datdba, 'USAGE')
                 FROM pg_database d WHERE d.datname = current_database()) AS may_vacuum
  FROM pg_class c
  LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
 WHERE c.oid = 'wharf.action_live'::regclass
