-- Every pause in force, by kind then tenant (the kind-wide pause first). The table holds one
-- row per paused kind or (kind, tenant); the executor reads it before its claims.
SELECT kind, tenant_id, note, actor, correlation_id, paused_at, false AS created
  FROM wharf.kind_pause
 ORDER BY kind, tenant_id NULLS FIRST
