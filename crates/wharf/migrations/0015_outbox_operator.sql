-- Operator actions on the outbox: the audit of every one, what operators found out about
-- in-doubt actions, and the link from a resend to the action it stands in for.
--
-- Owned by `wharf::outbox::operator`. Adds tables beside wharf.action and changes nothing of it:
-- cancelling uses transitions and a stop reason 0002's guard and checks already allow
-- (PROPOSED/ADMITTED -> CANCELLED / OPERATOR), and resolving never touches the action, which
-- the seed says stays ended and unchanged.
--
-- None of these tables has a foreign key to wharf.action, on purpose: retention deletes ended
-- actions and erasure deletes actions of a subject, and neither may be blocked by, nor take
-- with it, the record of what an operator did. Rows name actions by id only; the library
-- checks that the action exists (and locks it) when the row is written.

-- One row per operator action, whatever it was. Append-only (triggers below): an operator
-- cannot erase their own tracks through wharf. Never a payload: `detail` carries states, ids
-- and codes only.
CREATE TABLE wharf.operator_audit (
    audit_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operation      text        NOT NULL CHECK (operation IN ('cancel', 'resolve', 'redrive')),
    action_id      bigint      NOT NULL,
    actor          text        NOT NULL CHECK (octet_length(actor) BETWEEN 1 AND 256),
    detail         jsonb       NOT NULL CHECK (jsonb_typeof(detail) = 'object'),
    correlation_id text        NOT NULL CHECK (octet_length(correlation_id) BETWEEN 1 AND 64),
    recorded_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operator_audit_action ON wharf.operator_audit (action_id, audit_id);

-- What an operator found out about an UNCERTAIN action. Several rows per action are allowed (a
-- later finding corrects an earlier one; the latest is the current one); none is ever changed.
CREATE TABLE wharf.action_resolution (
    resolution_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action_id        bigint      NOT NULL,
    finding          text        NOT NULL CHECK (finding IN ('delivered', 'not-delivered')),
    note             text        NOT NULL CHECK (octet_length(note) <= 512),
    actor            text        NOT NULL CHECK (octet_length(actor) BETWEEN 1 AND 256),
    -- The action enqueued to stand in for this one, when the operator asked for a resend.
    resent_action_id bigint,
    correlation_id   text        NOT NULL CHECK (octet_length(correlation_id) BETWEEN 1 AND 64),
    recorded_at      timestamptz NOT NULL DEFAULT now(),
    -- Sending again what was delivered would deliver it twice.
    CONSTRAINT ck_action_resolution_resend CHECK (resent_action_id IS NULL OR finding = 'not-delivered')
);
CREATE INDEX action_resolution_action ON wharf.action_resolution (action_id, resolution_id);

-- A resend names the action it stands in for. One row per resend; the primary key makes an
-- action a resend of at most one original.
CREATE TABLE wharf.action_resend (
    action_id  bigint PRIMARY KEY,
    resends_id bigint      NOT NULL CHECK (resends_id <> action_id),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX action_resend_original ON wharf.action_resend (resends_id);

-- The inbox's append-only refusal (0003) is generic over the table it guards; reused here so
-- every append-only table in wharf refuses with the same SQLSTATE and message.
CREATE TRIGGER operator_audit_append_only
    BEFORE UPDATE OR DELETE ON wharf.operator_audit
    FOR EACH ROW EXECUTE FUNCTION wharf.inbox_refuse_change();
CREATE TRIGGER operator_audit_no_truncate
    BEFORE TRUNCATE ON wharf.operator_audit
    FOR EACH STATEMENT EXECUTE FUNCTION wharf.inbox_refuse_change();
CREATE TRIGGER action_resolution_append_only
    BEFORE UPDATE OR DELETE ON wharf.action_resolution
    FOR EACH ROW EXECUTE FUNCTION wharf.inbox_refuse_change();
CREATE TRIGGER action_resolution_no_truncate
    BEFORE TRUNCATE ON wharf.action_resolution
    FOR EACH STATEMENT EXECUTE FUNCTION wharf.inbox_refuse_change();
