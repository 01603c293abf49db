-- Pauses a kind (tenant NULL) or a kind for one tenant. Pausing what is already paused changes
-- nothing and returns the pause in force (`created` false).
-- $1 kind, $2 tenant (NULL: every tenant), $3 note, $4 actor, $5 correlation id.
WITH inserted AS (
    INSERT INTO wharf.kind_pause (kind, tenant_id, note, actor, correlation_id)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (kind, coalesce(tenant_id, '')) DO NOTHING
    RETURNING kind, tenant_id, note, actor, correlation_id, paused_at, true AS created
)
SELECT * FROM inserted
UNION ALL
SELECT kind, tenant_id, note, actor, correlation_id, paused_at, false AS created
  FROM wharf.kind_pause
 WHERE kind = $1 AND coalesce(tenant_id, '') = coalesce($2, '')
   AND NOT EXISTS (SELECT 1 FROM inserted)
