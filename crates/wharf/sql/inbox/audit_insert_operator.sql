-- Appends one operator-action audit row (stream-skip, stream-advance-floor).
-- $1 action, $2 tenant, $3 project, $4 operator account, $5 producer kind, $6 producer id,
-- $7 value before, $8 value after, $9 reason, $10 correlation id.
INSERT INTO wharf.inbox_audit (action, tenant_id, project_id, actor_account, producer_kind,
                               producer_id, sequence_before, sequence_after, outcome, reason,
                               correlation_id)
VALUES ($1, $2, $3, $4, $5, $6, $7::text::numeric, $8::text::numeric, $1, $9, $10)
