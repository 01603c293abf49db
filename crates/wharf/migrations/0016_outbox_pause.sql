-- Paused kinds (issue 13): an operator stops claims of one kind, or of one kind for one tenant,
-- without interrupting what already runs, and resumes them later.
--
-- Owned by `wharf::outbox::pause`. A row is a pause in force; resuming deletes it (what happened
-- when stays in wharf.operator_audit, which records both). The executor reads this table before
-- its claims (at most a second old on the live path) and leaves paused work where it is: a
-- kind-wide pause removes the kind from the claim, a tenant's pause caps that tenant at 0 in the
-- capped claim. Nothing here touches wharf.action.
CREATE TABLE wharf.kind_pause (
    kind           text        NOT NULL CHECK (octet_length(kind) BETWEEN 1 AND 64),
    -- NULL: every tenant of the kind.
    tenant_id      text        CHECK (octet_length(tenant_id) BETWEEN 1 AND 256),
    note           text        NOT NULL CHECK (octet_length(note) <= 512),
    actor          text        NOT NULL CHECK (octet_length(actor) BETWEEN 1 AND 256),
    correlation_id text        NOT NULL CHECK (octet_length(correlation_id) BETWEEN 1 AND 64),
    paused_at      timestamptz NOT NULL DEFAULT now()
);
-- One pause per kind and per (kind, tenant): pausing twice is one pause.
CREATE UNIQUE INDEX ux_kind_pause ON wharf.kind_pause (kind, coalesce(tenant_id, ''));

-- Pauses and resumes are operator actions without an action: the audit names the kind and
-- tenant in `detail`, and `action_id` is NULL for them.
ALTER TABLE wharf.operator_audit ALTER COLUMN action_id DROP NOT NULL;
ALTER TABLE wharf.operator_audit DROP CONSTRAINT operator_audit_operation_check;
ALTER TABLE wharf.operator_audit ADD CONSTRAINT operator_audit_operation_check
    CHECK (operation IN ('cancel', 'resolve', 'redrive', 'pause', 'resume'));
ALTER TABLE wharf.operator_audit ADD CONSTRAINT operator_audit_action_named
    CHECK ((action_id IS NULL) = (operation IN ('pause', 'resume')));
