-- The outbox: one row per effect on the outside world (SPEC §2).
--
-- Owned by `wharf::outbox`. The lifecycle rules live in `wharf_core::action`; the guard trigger
-- below mirrors `ActionState::can_transition` exactly, and an integration test compares the two
-- over all 49 (from, to) pairs.
--
-- Kinds are registered by applications at run time, so the database cannot list them. What the
-- database must enforce about a kind (at-most-once, instance-level) is copied onto the row at
-- enqueue and never changes afterwards.

CREATE TABLE wharf.action (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind                text        NOT NULL,
    tenant_id           text,
    project_id          text,
    lane_key            text        NOT NULL,
    idempotency_key     text        NOT NULL,
    -- SHA-256 over kind, scope, lane, canonical payload and subject. Kept after the payload is
    -- dropped, so a late re-enqueue with the same key is still checked for the same content.
    content_digest      bytea       NOT NULL,
    at_most_once        boolean     NOT NULL,
    instance_level      boolean     NOT NULL,
    state               text        NOT NULL,
    stop_reason         text,
    -- Names the current claim. Every write after a claim says `WHERE id = $1 AND epoch = $2`.
    epoch               bigint      NOT NULL DEFAULT 0,
    attempt             integer     NOT NULL DEFAULT 0,
    max_attempts        integer     NOT NULL,
    payload             jsonb,
    subject_account_id  text,
    run_at              timestamptz NOT NULL,
    expires_at          timestamptz,
    lease_expires_at    timestamptz,
    -- Set by the fence just before a provider call; cleared by a proven Retry.
    write_started_at    timestamptz,
    readback_ref        text,
    error_code          text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    ended_at            timestamptz,
    -- Claim accelerator, never a correctness input (see ix_action_due below). True for every
    -- lane's first unstarted action; may also be true for others until a claim demotes them.
    head_hint           boolean     NOT NULL DEFAULT true,

    CONSTRAINT ck_action_kind CHECK (kind ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT ck_action_state CHECK (state IN
        ('PROPOSED', 'ADMITTED', 'EXECUTING', 'DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')),
    -- The closed set of `wharf_core::action::StopReason`, each with the one state it ends in.
    CONSTRAINT ck_action_stop_reason CHECK (stop_reason IS NULL OR (state, stop_reason) IN (
        ('DONE', 'DONE'),
        ('FAILED', 'ATTEMPTS_EXHAUSTED'),
        ('FAILED', 'PROVIDER_REFUSED'),
        ('UNCERTAIN', 'UNCERTAIN_PROVIDER'),
        ('UNCERTAIN', 'LEASE_LOST_AFTER_WRITE'),
        ('CANCELLED', 'EXPIRED'),
        ('CANCELLED', 'CANCELLED_BY_ADAPTER'),
        ('CANCELLED', 'REFUSED'),
        ('CANCELLED', 'OPERATOR'))),
    -- An ended action always has a stop reason and an end time, and keeps no payload; a live one
    -- has neither and keeps its payload.
    CONSTRAINT ck_action_ended CHECK (
        (state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED'))
            = (stop_reason IS NOT NULL)
        AND (state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')) = (ended_at IS NOT NULL)
        AND (state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')) = (payload IS NULL)),
    CONSTRAINT ck_action_tenant CHECK (tenant_id IS NOT NULL OR instance_level),
    CONSTRAINT ck_action_scope_len CHECK (
        (tenant_id IS NULL OR octet_length(tenant_id) BETWEEN 1 AND 256)
        AND (project_id IS NULL OR octet_length(project_id) BETWEEN 1 AND 256)
        AND (subject_account_id IS NULL OR octet_length(subject_account_id) BETWEEN 1 AND 256)),
    CONSTRAINT ck_action_lane_key CHECK (octet_length(lane_key) BETWEEN 1 AND 256),
    CONSTRAINT ck_action_idempotency_key CHECK (octet_length(idempotency_key) BETWEEN 1 AND 256),
    CONSTRAINT ck_action_digest CHECK (octet_length(content_digest) = 32),
    CONSTRAINT ck_action_counters CHECK (epoch >= 0 AND attempt >= 0 AND max_attempts >= 1),
    CONSTRAINT ck_action_lease CHECK (state <> 'EXECUTING' OR lease_expires_at IS NOT NULL),
    CONSTRAINT ck_action_error_code CHECK (error_code IS NULL OR error_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT ck_action_readback_ref CHECK (readback_ref IS NULL OR octet_length(readback_ref) <= 1024),
    CONSTRAINT ux_action_idempotency_key UNIQUE (idempotency_key)
);

COMMENT ON TABLE wharf.action IS 'wharf outbox: one row per side effect (SPEC §2)';

-- One executing action per lane, even when several replicas claim at the same moment.
CREATE UNIQUE INDEX ux_action_lane_executing ON wharf.action (lane_key) WHERE state = 'EXECUTING';

-- Every unstarted action by lane, in id order: answers "is there an earlier unstarted action in
-- this lane?" with one index probe, and finds the lane's next head.
CREATE INDEX ix_action_lane_pending ON wharf.action (lane_key, id)
    WHERE state IN ('PROPOSED', 'ADMITTED');

-- Why a hint column and not a per-lane table: a `wharf.lane` row would have to be updated by
-- every enqueue, so enqueues into one lane would queue behind each other's row lock until the
-- application's transaction commits, and the executor's completions would wait for those
-- application transactions too. Scanning all due admitted rows instead degrades with backlog:
-- with 100 k rows waiting behind a busy lane, every claim would step over all of them. The hint
-- keeps the due index to lane heads (plus at most one busy head per executing lane and a bounded
-- number of not-yet-demoted rows): enqueue sets it (the default), a claim that finds a row with
-- an earlier unstarted row demotes it (holding a share lock on that earlier row, so the demotion
-- cannot race the earlier row's departure), and the row that leaves the unstarted states promotes
-- its lane's next one (trigger below). The claim still checks lane order and lane exclusivity
-- exactly against ix_action_lane_pending and ux_action_lane_executing, so a wrong hint can only
-- cost a wasted probe, never a wrong claim.
CREATE INDEX ix_action_due ON wharf.action (run_at, id)
    WHERE state = 'ADMITTED' AND head_hint;

-- Expired leases (reclaims and the at-most-once sweep).
CREATE INDEX ix_action_lease ON wharf.action (lease_expires_at) WHERE state = 'EXECUTING';

-- Unstarted actions with an expiry (the expiry sweep).
CREATE INDEX ix_action_expiry ON wharf.action (expires_at)
    WHERE state IN ('PROPOSED', 'ADMITTED') AND expires_at IS NOT NULL;

-- Retention deletes ended actions oldest first.
CREATE INDEX ix_action_ended ON wharf.action (ended_at) WHERE ended_at IS NOT NULL;

-- Erasure by subject.
CREATE INDEX ix_action_subject ON wharf.action (subject_account_id)
    WHERE subject_account_id IS NOT NULL;

-- The guard: refuses every transition `ActionState::can_transition` refuses, any change to an
-- ended row, a re-claim of an at-most-once action whose write started, a change to a column fixed
-- at enqueue, and an epoch that does not move as a claim says. Each refusal has its own SQLSTATE
-- (class WH) so callers and tests can tell them apart.
CREATE FUNCTION wharf.action_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED') THEN
        RAISE EXCEPTION 'wharf.action %: an ended action (%) never changes', OLD.id, OLD.state
            USING ERRCODE = 'WH002';
    END IF;
    IF (OLD.state, NEW.state) NOT IN (
        ('PROPOSED', 'ADMITTED'), ('PROPOSED', 'CANCELLED'),
        ('ADMITTED', 'EXECUTING'), ('ADMITTED', 'ADMITTED'), ('ADMITTED', 'CANCELLED'),
        ('EXECUTING', 'EXECUTING'), ('EXECUTING', 'ADMITTED'), ('EXECUTING', 'DONE'),
        ('EXECUTING', 'UNCERTAIN'), ('EXECUTING', 'FAILED'), ('EXECUTING', 'CANCELLED'))
    THEN
        RAISE EXCEPTION 'wharf.action %: transition % -> % is not allowed', OLD.id, OLD.state, NEW.state
            USING ERRCODE = 'WH001';
    END IF;
    IF NEW.kind IS DISTINCT FROM OLD.kind
        OR NEW.id IS DISTINCT FROM OLD.id
        OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
        OR NEW.content_digest IS DISTINCT FROM OLD.content_digest
        OR NEW.at_most_once IS DISTINCT FROM OLD.at_most_once
        OR NEW.instance_level IS DISTINCT FROM OLD.instance_level
        OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
        OR NEW.project_id IS DISTINCT FROM OLD.project_id
        OR NEW.lane_key IS DISTINCT FROM OLD.lane_key
        OR NEW.subject_account_id IS DISTINCT FROM OLD.subject_account_id
        OR NEW.max_attempts IS DISTINCT FROM OLD.max_attempts
        OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
        OR NEW.created_at IS DISTINCT FROM OLD.created_at
        -- The payload only goes away, when the action ends (ck_action_ended forces that).
        OR (NEW.payload IS NOT NULL AND NEW.payload IS DISTINCT FROM OLD.payload)
    THEN
        RAISE EXCEPTION 'wharf.action %: a column fixed at enqueue was changed', OLD.id
            USING ERRCODE = 'WH004';
    END IF;
    -- A claim (entering EXECUTING, or EXECUTING again with a new epoch) raises the epoch by
    -- exactly one; nothing else moves it, and nothing lowers it.
    IF NOT (
        CASE
            WHEN OLD.state = 'ADMITTED' AND NEW.state = 'EXECUTING' THEN NEW.epoch = OLD.epoch + 1
            WHEN OLD.state = 'EXECUTING' AND NEW.state = 'EXECUTING'
                THEN NEW.epoch IN (OLD.epoch, OLD.epoch + 1)
            ELSE NEW.epoch = OLD.epoch
        END)
    THEN
        RAISE EXCEPTION 'wharf.action %: epoch % -> % does not match the transition % -> %',
            OLD.id, OLD.epoch, NEW.epoch, OLD.state, NEW.state
            USING ERRCODE = 'WH005';
    END IF;
    -- An at-most-once action whose write started cannot tell whether the provider holds the
    -- effect; claiming it again could send it twice.
    IF NEW.state = 'EXECUTING' AND NEW.epoch > OLD.epoch
        AND OLD.at_most_once AND OLD.write_started_at IS NOT NULL
    THEN
        RAISE EXCEPTION 'wharf.action %: an at-most-once action whose write started is never claimed again', OLD.id
            USING ERRCODE = 'WH003';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER action_guard BEFORE UPDATE ON wharf.action
    FOR EACH ROW EXECUTE FUNCTION wharf.action_guard();

-- Keeps the claim hint true for every lane's first unstarted action: when an unstarted action
-- leaves the unstarted states (claimed, refused, expired) or is deleted (erasure), its lane's
-- first remaining unstarted action becomes a claim candidate. Runs after the statement's rows are
-- all changed, with a fresh snapshot, so it sees the other rows the same statement removed and
-- every action committed meanwhile. PROPOSED rows are never demoted, so only an ADMITTED row
-- can need the update (and ADMITTED -> ADMITTED is allowed by the guard).
CREATE FUNCTION wharf.action_promote_next() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE wharf.action
       SET head_hint = true
     WHERE id = (SELECT n.id FROM wharf.action n
                  WHERE n.lane_key = OLD.lane_key AND n.state IN ('PROPOSED', 'ADMITTED')
                  ORDER BY n.id LIMIT 1)
       AND state = 'ADMITTED' AND NOT head_hint;
    RETURN NULL;
END
$$;

CREATE TRIGGER action_promote_after_update AFTER UPDATE OF state ON wharf.action
    FOR EACH ROW
    WHEN (OLD.state IN ('PROPOSED', 'ADMITTED') AND NEW.state NOT IN ('PROPOSED', 'ADMITTED'))
    EXECUTE FUNCTION wharf.action_promote_next();

CREATE TRIGGER action_promote_after_delete AFTER DELETE ON wharf.action
    FOR EACH ROW
    WHEN (OLD.state IN ('PROPOSED', 'ADMITTED'))
    EXECUTE FUNCTION wharf.action_promote_next();
