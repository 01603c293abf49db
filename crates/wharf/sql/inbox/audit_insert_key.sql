-- Appends one key-removal audit row.
-- $1 tenant, $2 project, $3 operator account, $4 key id, $5 reason, $6 correlation id.
INSERT INTO wharf.inbox_audit (action, tenant_id, project_id, actor_account, key_id, outcome,
                               reason, correlation_id)
VALUES ('key-remove', $1, $2, $3, $4, 'key-remove', $5, $6)
