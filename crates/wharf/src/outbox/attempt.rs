//! The attempt handle an adapter receives, and its fence.
//!
//! Owns: [`Attempt`] (what one claim of one action knows) and [`Fence`] (the last check before a
//! provider call). Must not know: what the adapter does, or how results are recorded.
//!
//! "Only the executor calls an adapter" holds by construction: [`Adapter::execute`] needs an
//! `&mut Attempt`, and an `Attempt` can only be built inside this crate, by the executor, from a
//! row it just claimed.
//!
//! [`Adapter::execute`]: super::Adapter::execute

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;

use super::fail_point::{self, FailPoint};
use super::fences::Fences;
use crate::store;

/// Where the fence of one attempt stands. The executor reads it after `execute` returns,
/// panics or times out, to tell "before the write" from "maybe after".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FenceStage {
    /// `begin_write` was not called (or refused): nothing can have been written.
    NotStarted,
    /// `begin_write` was sent but its answer was not seen (the call was cut off): the database
    /// may hold `write_started_at`, so the executor treats it as passed.
    InFlight,
    /// `begin_write` succeeded: the provider may hold the effect.
    Passed,
}

/// A connection inside a `READ ONLY` transaction ([`Attempt::read_only`]): use it as a
/// `&mut PgConnection`; dropping it rolls back.
pub struct ReadOnly(sqlx::Transaction<'static, sqlx::Postgres>);

impl std::ops::Deref for ReadOnly {
    type Target = sqlx::PgConnection;
    fn deref(&self) -> &sqlx::PgConnection {
        &self.0
    }
}

impl std::ops::DerefMut for ReadOnly {
    fn deref_mut(&mut self) -> &mut sqlx::PgConnection {
        &mut self.0
    }
}

impl fmt::Debug for ReadOnly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReadOnly")
    }
}

/// One claim of one action, handed to [`Adapter::execute`](super::Adapter::execute).
pub struct Attempt {
    pub(crate) action_id: i64,
    pub(crate) kind: String,
    pub(crate) tenant_id: Option<String>,
    pub(crate) project_id: Option<String>,
    pub(crate) lane_key: String,
    pub(crate) idempotency_key: String,
    pub(crate) payload: Value,
    pub(crate) subject_account_id: Option<String>,
    pub(crate) attempt: u32,
    pub(crate) max_attempts: u32,
    pub(crate) epoch: i64,
    pub(crate) enqueued_at: DateTime<Utc>,
    pub(crate) write_started: bool,
    pub(crate) pool: PgPool,
    pub(crate) call_timeout: Duration,
    pub(crate) fence_margin_ms: u64,
    pub(crate) now: Option<DateTime<Utc>>,
    pub(crate) fence: FenceStage,
    /// The claim was this attempt's fence (it recorded `write_started_at`), taken at this
    /// instant or later: the monotonic clock read before the claim statement was sent, so the
    /// lease cannot have started before it.
    pub(crate) claim_fence: Option<Instant>,
    pub(crate) lease_ms: u64,
    /// The fence refused while this claim still held the action and nothing was written: it
    /// could not reach the database, or too little lease was left. An attempt abandoned after
    /// that is given back at once (no attempt counted) instead of waiting out its lease.
    pub(crate) give_back_on_abandon: bool,
    /// The executor's fence batcher (`fences.rs`), under `run` and `run_once_at` alike.
    pub(crate) fences: Fences,
}

impl fmt::Debug for Attempt {
    // No payload: it may carry personal data, and Debug output ends up in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attempt")
            .field("action_id", &self.action_id)
            .field("kind", &self.kind)
            .field("attempt", &self.attempt)
            .field("epoch", &self.epoch)
            .field("write_started", &self.write_started)
            .finish_non_exhaustive()
    }
}

impl Attempt {
    /// The action's id.
    pub fn action_id(&self) -> i64 {
        self.action_id
    }
    /// The kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }
    /// The tenant (absent only for instance-level kinds).
    pub fn tenant_id(&self) -> Option<&str> {
        self.tenant_id.as_deref()
    }
    /// The project.
    pub fn project_id(&self) -> Option<&str> {
        self.project_id.as_deref()
    }
    /// The lane.
    pub fn lane_key(&self) -> &str {
        &self.lane_key
    }
    /// The idempotency key: pass it to the provider (a header, a Message-ID, a marker) so the
    /// provider or a read-back can recognise the effect.
    pub fn idempotency_key(&self) -> &str {
        &self.idempotency_key
    }
    /// The payload as enqueued.
    pub fn payload(&self) -> &Value {
        &self.payload
    }
    /// The subject account.
    pub fn subject_account_id(&self) -> Option<&str> {
        self.subject_account_id.as_deref()
    }
    /// This attempt's number, from 1. Deferrals do not count.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
    /// Attempts allowed; a Retry on the last one ends FAILED / `ATTEMPTS_EXHAUSTED`.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }
    /// The claim's epoch.
    pub fn epoch(&self) -> i64 {
        self.epoch
    }
    /// When the action was enqueued, by the database clock: how long it waited can matter to
    /// the effect too (a reminder hours late may be worth dropping).
    pub fn enqueued_at(&self) -> DateTime<Utc> {
        self.enqueued_at
    }
    /// An earlier attempt passed its fence and may have written: read back before writing.
    pub fn write_started(&self) -> bool {
        self.write_started
    }
    /// The kind's call timeout: the executor cuts `execute` off after it. An adapter sets its
    /// own provider timeouts inside it, so it can answer precisely (Retry, Uncertain) itself.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }
    /// A connection for look-ups before the provider call (for example re-reading what a
    /// notice is built from, or a suppression list), inside a `READ ONLY` transaction:
    /// PostgreSQL refuses any write through it, so an adapter cannot change a row behind the
    /// executor's fence. Dropping it rolls back and returns the connection; drop it before the
    /// provider call, so no transaction is open while the provider runs.
    pub async fn read_only(&self) -> Result<ReadOnly, sqlx::Error> {
        Ok(ReadOnly(self.pool.begin_with("BEGIN READ ONLY").await?))
    }
    /// The fence to pass just before the provider call.
    pub fn fence(&mut self) -> Fence<'_> {
        Fence { attempt: self }
    }
}

/// The last check before a provider call; see [`Fence::begin_write`].
#[derive(Debug)]
pub struct Fence<'a> {
    attempt: &'a mut Attempt,
}

/// Why the fence refused. The adapter must not call the provider and returns
/// [`Outcome::Abandoned`](super::Outcome::Abandoned).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FenceRefused {
    /// Another claim (a newer epoch) holds the action, or it is no longer executing.
    #[error("another claim holds the action (epoch {current}, state {state})")]
    Superseded {
        /// The action's epoch now.
        current: i64,
        /// The action's state now.
        state: String,
    },
    /// The action was deleted (erasure).
    #[error("the action no longer exists")]
    Gone,
    /// Less than the fence margin of lease is left: the call might outlive the lease.
    #[error("only {left_ms} ms of lease left, the fence margin is {margin_ms} ms")]
    LeaseTooShort {
        /// Lease left.
        left_ms: i64,
        /// The margin.
        margin_ms: u64,
    },
    /// The database could not be asked. Refusing is the safe answer: the lease will run out
    /// and the action will be claimed again. Shared: one failed statement answers every fence
    /// it carried.
    #[error("the fence could not reach the database: {0}")]
    Database(#[source] Arc<sqlx::Error>),
}

impl From<sqlx::Error> for FenceRefused {
    fn from(e: sqlx::Error) -> Self {
        FenceRefused::Database(Arc::new(e))
    }
}

impl Fence<'_> {
    /// Records `write_started_at` in its own short transaction, naming (id, epoch), and only
    /// with at least the fence margin of lease left. `Ok` means: call the provider now.
    ///
    /// Fences asked at the same moment share one statement (see `fences.rs`); each attempt
    /// still waits for that statement's commit.
    ///
    /// For a kind that is not at-most-once, the claim's own commit may already have recorded
    /// `write_started_at` (SPEC §2.3): then this answers at once while more than the fence margin
    /// of the lease is left by the executor's monotonic clock, and asks the database (which
    /// refuses on its own clock) once it may not be.
    pub async fn begin_write(self) -> Result<(), FenceRefused> {
        let a = self.attempt;
        if let Some(claimed) = a.claim_fence {
            let left = Duration::from_millis(a.lease_ms).saturating_sub(claimed.elapsed());
            if left > Duration::from_millis(a.fence_margin_ms) {
                a.fence = FenceStage::Passed;
                fail_point::reached(FailPoint::Fenced, a.action_id);
                return Ok(());
            }
        }
        a.fence = FenceStage::InFlight;
        let answer = match a.fences.ask(a.action_id, a.epoch, a.now).await {
            Some(answer) => answer,
            // The batcher's task is gone (it runs while any handle lives, so only if it died):
            // ask the database directly.
            None => {
                store::outbox::begin_write(&a.pool, a.action_id, a.epoch, a.fence_margin_ms, a.now)
                    .await
                    .map_err(Arc::new)
            }
        };
        let passed = match answer {
            Ok(passed) => passed,
            Err(e) => {
                // The UPDATE may or may not have committed; InFlight stays, so a panic or a
                // timeout from here on counts as "maybe written".
                a.give_back_on_abandon = true;
                return Err(FenceRefused::Database(e));
            }
        };
        if passed {
            a.fence = FenceStage::Passed;
            fail_point::reached(FailPoint::Fenced, a.action_id);
            return Ok(());
        }
        a.fence = FenceStage::NotStarted;
        let state = match store::outbox::fence_state(&a.pool, a.action_id, a.now).await {
            Ok(state) => state,
            Err(e) => {
                a.give_back_on_abandon = true;
                return Err(e.into());
            }
        };
        match state {
            None => Err(FenceRefused::Gone),
            Some((epoch, state, left_ms)) if epoch == a.epoch && state == "EXECUTING" => {
                a.give_back_on_abandon = true;
                Err(FenceRefused::LeaseTooShort {
                    left_ms: left_ms.unwrap_or(0),
                    margin_ms: a.fence_margin_ms,
                })
            }
            Some((current, state, _)) => Err(FenceRefused::Superseded { current, state }),
        }
    }
}
