//! The outbox: record an effect on the outside world in the same transaction as the change that
//! causes it, and carry it out later, exactly as the lifecycle allows (SPEC §2).
//!
//! ```text
//! application tx ──enqueue──▶ wharf.action (PROPOSED/ADMITTED)
//!                                  │ claim: due lane heads, FOR UPDATE SKIP LOCKED, epoch+1, lease
//!                                  ▼
//!                 Executor ──Attempt──▶ Adapter::execute ──fence().begin_write()──▶ provider
//!                                  │ complete, fenced by (id, epoch)
//!                                  ▼
//!                DONE / UNCERTAIN / FAILED / CANCELLED, or ADMITTED again (retry, defer)
//! ```
//!
//! - [`enqueue`] / [`enqueue_many`] take the caller's connection or transaction; every field is
//!   validated first ([`ActionRequest`]), idempotency is by key plus content digest.
//! - [`Registry`] maps kinds to [`Adapter`]s; [`KindSpec`] declares at-most-once and
//!   instance-level, which are copied onto each row.
//! - [`Executor`] claims, runs and records; [`Executor::drain`] is for tests and `wharf drain`.
//! - [`Attempt`] is what an adapter gets; only the executor can build one, so only the
//!   executor can call an adapter. [`Fence::begin_write`] is the last check before a provider
//!   call.
//! - [`admit`], [`refuse`], [`get`], [`list`], [`due`] (typed due depth per kind),
//!   [`erase_subject`], [`delete_ended_before`] for operators; [`cancel`], [`resolve`] (in-doubt actions, with an optional [`resend`]) and
//!   [`audit`] write and read the operator audit (`operator.rs`); [`pause`] and [`resume`]
//!   stop and restart claims of a kind, or of a kind for one tenant (`pause.rs`).
//!
//! The lifecycle itself (states, the one transition table, stop reasons) is
//! `wharf_core::action`; the database's guard trigger mirrors it. Time is always the
//! database's clock; functions ending in `_at` take a `now` that replaces it, for tests.
//!
//! Must not know: any provider (adapters live with the effects they own), HTTP, or the CLI.

mod attempt;
mod caps;
mod decide;
mod error;
mod executor;
mod fail_point;
mod fences;
mod kind;
pub mod metrics;
mod operator;
mod ops;
mod pause;
mod request;

pub use crate::held::IDLE_CHECK_AFTER_MS as CONNECTION_IDLE_CHECK_AFTER_MS;
pub use attempt::{Attempt, Fence, FenceRefused, ReadOnly};
pub use decide::{DEFER_MS_MAX, READBACK_REF_BYTES_MAX};
pub use error::Error;
pub use executor::{
    CLAIM_BATCH_LIMIT, DrainReport, Executor, ExecutorConfig, FENCE_MARGIN_PER_LEASE_DIVISOR,
    LiveVacuum, NOTIFY_CHANNEL, SweepReport, VACUUM_DEAD_ROWS_LIMIT_MAX,
    VACUUM_DEAD_ROWS_LIMIT_MIN,
};
pub use fail_point::{FAIL_POINT_EXIT_CODE, FAIL_POINT_VAR};
pub use kind::{
    ATTEMPTS_MAX, Adapter, BACKOFF_CAP_MS_MAX, CALL_TIMEOUT_MS_MAX, ClaimBudget, ErrorCode,
    InvalidErrorCode, KindSpec, NAME_BYTES_MAX, Outcome, PAYLOAD_BYTES_LIMIT,
    PAYLOAD_BYTES_MAX_DEFAULT, Registry,
};
pub use operator::{
    ACTOR_BYTES_MAX, AUDIT_LIMIT_MAX, AuditEntry, AuditFilter, CORRELATION_ID_BYTES_MAX, Cancelled,
    Finding, NOTE_BYTES_MAX, Operator, Resolution, Resolve, Resolved, audit, cancel, resend,
    resend_key, resend_of, resolutions, resolve,
};
pub use ops::{
    ActionView, DueStats, ENQUEUE_BATCH_MAX, Enqueued, LIST_LIMIT_MAX, ListFilter, admit,
    admit_proposal, delete_ended_before, due, enqueue, enqueue_many, erase_subject, get, list,
    refuse, refuse_proposal,
};
pub use pause::{PAUSE_REFRESH_MS, PAUSES_MAX, Pause, Paused, Resumed, pause, pauses, resume};
pub use request::{
    ActionRequest, IDEMPOTENCY_KEY_BYTES_MAX, LANE_KEY_BYTES_MAX, PAYLOAD_DEPTH_MAX,
    SCOPE_BYTES_MAX, canonical_payload, content_digest,
};
pub use wharf_core::action::{ActionState, StopReason};
pub use wharf_core::backoff::Backoff;
