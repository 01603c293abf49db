-- Resumes a kind (tenant NULL: the kind-wide pause only) or a kind for one tenant. Returns the
-- pause it ended; no row when there was none.
-- $1 kind, $2 tenant (NULL: the kind-wide pause).
DELETE FROM wharf.kind_pause
 WHERE kind = $1 AND coalesce(tenant_id, '') = coalesce($2, '')
RETURNING kind, tenant_id, note, actor, correlation_id, paused_at, false AS created
