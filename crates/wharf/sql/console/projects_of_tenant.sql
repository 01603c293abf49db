-- Projects a tenant has (a project exists once a key or a stream names it), in id order after
-- $2 (NULL: from the first), at most $3. Both reads follow a primary or unique key's prefix.
SELECT project_id FROM (
    (SELECT DISTINCT project_id::text FROM wharf.inbox_keys WHERE tenant_id = $1
      AND ($2::text IS NULL OR project_id > $2) ORDER BY 1 LIMIT $3)
    UNION
    (SELECT DISTINCT project_id::text FROM wharf.inbox_streams WHERE tenant_id = $1
      AND ($2::text IS NULL OR project_id > $2) ORDER BY 1 LIMIT $3)
) p ORDER BY project_id LIMIT $3
