//! Kinds and adapters: what an application registers, and what an adapter may answer.
//!
//! Owns: [`KindSpec`], the [`Adapter`] trait, [`Outcome`], [`ErrorCode`], [`ClaimBudget`] and the
//! [`Registry`] that maps kind names to adapters. Must not know: SQL, the executor's loop, or any
//! provider. Each kind has exactly one adapter; the registry refuses a second.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use wharf_core::backoff::Backoff;

use super::attempt::Attempt;
use super::error::Error;

/// Longest kind name and error code, in bytes (both `[a-z0-9_.-]`).
pub const NAME_BYTES_MAX: usize = 64;
/// Most attempts a kind or a request may allow. An effect that needs more is not a retry loop.
pub const ATTEMPTS_MAX: u32 = 1_000;
/// Longest backoff cap: a day. A longer wait is a schedule, not a retry.
pub const BACKOFF_CAP_MS_MAX: u64 = 24 * 60 * 60 * 1_000;
/// Longest provider call timeout. Must also stay below the executor's fence margin.
pub const CALL_TIMEOUT_MS_MAX: u64 = 10 * 60 * 1_000;
/// Default payload bound (SPEC §2.1): 64 KiB of canonical JSON. Payloads carry identifiers.
pub const PAYLOAD_BYTES_MAX_DEFAULT: usize = 64 * 1024;
/// Highest payload bound a registry accepts: 1 MiB. Bigger data belongs in the application's
/// tables, referenced by id.
pub const PAYLOAD_BYTES_LIMIT: usize = 1024 * 1024;

/// What a kind declares about itself. Copied onto each action at enqueue (the flags) or used by
/// the executor (timeouts, backoff).
#[derive(Debug, Clone, PartialEq)]
pub struct KindSpec {
    /// The kind's name, `[a-z0-9_.-]{1,64}`, unique in a registry.
    pub name: &'static str,
    /// The provider cannot read an earlier write back: once the write started, the action is
    /// never claimed again (a lost lease ends it UNCERTAIN / `LEASE_LOST_AFTER_WRITE`).
    pub at_most_once: bool,
    /// The effect belongs to the instance, not a tenant: `tenant_id` may be absent.
    pub instance_level: bool,
    /// Attempts when the request does not say (1..=[`ATTEMPTS_MAX`]).
    pub max_attempts_default: u32,
    /// Delays between retries.
    pub backoff: Backoff,
    /// The whole `execute` call runs under this timeout. It must be shorter than the executor's
    /// fence margin, so a call that passed the fence ends before its lease does.
    pub call_timeout_ms: u64,
}

impl KindSpec {
    /// Checks the spec's own bounds (the fence margin is checked by the executor).
    pub fn validate(&self) -> Result<(), Error> {
        if !is_code(self.name) {
            return Err(Error::Config(format!(
                "kind name {:?} must be 1..={NAME_BYTES_MAX} bytes of [a-z0-9_.-]",
                self.name
            )));
        }
        if !(1..=ATTEMPTS_MAX).contains(&self.max_attempts_default) {
            return Err(Error::Config(format!(
                "kind {}: max_attempts_default must be 1..={ATTEMPTS_MAX}",
                self.name
            )));
        }
        if !(1..=CALL_TIMEOUT_MS_MAX).contains(&self.call_timeout_ms) {
            return Err(Error::Config(format!(
                "kind {}: call_timeout_ms must be 1..={CALL_TIMEOUT_MS_MAX}",
                self.name
            )));
        }
        let b = &self.backoff;
        if b.factor == 0
            || b.jitter_percent > 100
            || b.base_ms > b.cap_ms
            || b.cap_ms > BACKOFF_CAP_MS_MAX
        {
            return Err(Error::Config(format!(
                "kind {}: backoff needs factor ≥ 1, jitter ≤ 100 %, base ≤ cap ≤ {BACKOFF_CAP_MS_MAX} ms",
                self.name
            )));
        }
        Ok(())
    }
}

/// True for `[a-z0-9_.-]{1,64}`.
pub(crate) const fn is_code(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > NAME_BYTES_MAX {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'.' || c == b'-') {
            return false;
        }
        i += 1;
    }
    true
}

/// A stable diagnostic code, `[a-z0-9_.-]{1,64}`: what went wrong, in words that do not change
/// between releases. Never a provider response, a token or payload data: the type's alphabet
/// makes most of those impossible, and the rule makes the rest a review finding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorCode(Cow<'static, str>);

/// A string that is not a valid [`ErrorCode`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("error codes are 1..=64 bytes of [a-z0-9_.-]")]
pub struct InvalidErrorCode;

impl ErrorCode {
    /// A code known at compile time. Panics (at compile time in a `const`) when invalid.
    pub const fn from_static(code: &'static str) -> ErrorCode {
        assert!(is_code(code), "error codes are 1..=64 bytes of [a-z0-9_.-]");
        ErrorCode(Cow::Borrowed(code))
    }

    /// A code built at run time.
    pub fn new(code: impl Into<String>) -> Result<ErrorCode, InvalidErrorCode> {
        let code = code.into();
        if is_code(&code) {
            Ok(ErrorCode(Cow::Owned(code)))
        } else {
            Err(InvalidErrorCode)
        }
    }

    /// The code.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The executor's code for an adapter that panicked.
    pub const ADAPTER_PANIC: ErrorCode = ErrorCode::from_static("adapter_panic");
    /// The executor's code for an adapter that overran the kind's `call_timeout_ms`.
    pub const ADAPTER_TIMEOUT: ErrorCode = ErrorCode::from_static("adapter_timeout");
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What an attempt found, and so what happens next (the seed's table, SPEC §2.4).
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The provider confirmed the effect. ⇒ DONE / `DONE`, with the provider's reference.
    Done {
        /// The provider's id for the effect (at most 1 KiB; longer is dropped).
        readback_ref: Option<String>,
    },
    /// The provider proved it holds nothing and a later attempt may succeed. ⇒ ADMITTED after
    /// `after` (capped at the kind's backoff cap) or the kind's backoff, fence cleared; at the
    /// last attempt FAILED / `ATTEMPTS_EXHAUSTED`.
    Retry {
        /// The provider's own wait (e.g. `Retry-After`), if it gave one.
        after: Option<Duration>,
        /// Why.
        code: ErrorCode,
    },
    /// Not now, and nothing was written (a rate limit). ⇒ ADMITTED after `until` (capped at a
    /// day); the attempt does not count.
    Defer {
        /// How long from now.
        until: Duration,
    },
    /// The effect may exist. ⇒ UNCERTAIN / `UNCERTAIN_PROVIDER`; nothing sends it again.
    Uncertain {
        /// Why.
        code: ErrorCode,
    },
    /// The provider refused it, or nobody can receive it. ⇒ FAILED / `PROVIDER_REFUSED`.
    Failed {
        /// Why.
        code: ErrorCode,
    },
    /// Nothing should be written. ⇒ CANCELLED / `CANCELLED_BY_ADAPTER`.
    Cancelled {
        /// Why.
        code: ErrorCode,
    },
    /// The fence refused; another holder owns the action. ⇒ nothing is recorded.
    Abandoned,
}

impl Outcome {
    /// The metric label of this result.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Done { .. } => "done",
            Outcome::Retry { .. } => "retry",
            Outcome::Defer { .. } => "defer",
            Outcome::Uncertain { .. } => "uncertain",
            Outcome::Failed { .. } => "failed",
            Outcome::Cancelled { .. } => "cancelled",
            Outcome::Abandoned => "abandoned",
        }
    }
}

/// How many actions of a kind the adapter is willing to start now, asked just before a claim.
///
/// This is the rate-limit hook: an adapter behind a provider quota answers from its own token
/// bucket, and the executor never claims what it could not start, so a limit never leaves an
/// action EXECUTING (holding its lane) while it waits. The executor gives back what a claim
/// returns beyond a kind's number without counting an attempt.
///
/// Reclaims of expired leases count against a kind's number like any claimed action, but are
/// never held back by [`PerTenant`](ClaimBudget::PerTenant)'s caps: lease recovery does not wait
/// for a budget (the adapter is told about them through [`Adapter::claimed`] like the rest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimBudget {
    /// No limit beyond the executor's concurrency.
    Unlimited,
    /// At most this many now (0 ⇒ the kind is skipped by this claim).
    AtMost(u32),
    /// A budget per tenant (e.g. the `envelope` kind's delivery limit, SPEC §3.8): at most
    /// `total` of the kind now; of a listed tenant at most its number (0 ⇒ none of that
    /// tenant's actions is claimed, they are not even looked at); of any other tenant, and of
    /// actions without a tenant, at most `others`. The caps are applied inside the claim
    /// statement, before anything is locked, so a tenant out of budget never has a row taken
    /// from ADMITTED. A tenant listed twice gets the smaller number.
    PerTenant {
        /// At most this many of the kind, whatever the tenant.
        total: u32,
        /// At most this many of each tenant that `tenants` does not list.
        others: u32,
        /// Tenants with their own cap. Of more than [`ClaimBudget::TENANTS_MAX`] only the
        /// tightest caps are kept; the rest get `others` for this claim.
        tenants: Vec<(String, u32)>,
    },
}

impl ClaimBudget {
    /// Most tenants one [`PerTenant`](ClaimBudget::PerTenant) answer may list: the caps travel
    /// to PostgreSQL as arrays with every claim. The same bound as the delivery limit's
    /// default number of tenant buckets, so its answers fit whole.
    pub const TENANTS_MAX: usize = 10_000;
}

/// The one piece of code that carries out one kind of effect.
///
/// Only the executor can call [`Adapter::execute`]: it needs an [`Attempt`], and only the
/// executor can build one. Rules for implementers:
/// - Call `attempt.fence().begin_write().await` just before the provider call; if it refuses,
///   do not call the provider and return [`Outcome::Abandoned`].
/// - When `attempt.write_started()` is true, an earlier attempt may have written: read back
///   before writing again (or declare the kind `at_most_once`).
/// - Return a stable [`ErrorCode`], never a provider's text.
/// - A panic counts as Retry before the fence and Uncertain after it; so does overrunning
///   `call_timeout_ms`.
#[async_trait]
pub trait Adapter: Send + Sync + 'static {
    /// The kind this adapter serves. Read once, at registration.
    fn spec(&self) -> KindSpec;

    /// Checked at enqueue; an error is a typed error to the caller and nothing is written. Keep
    /// the reason short and free of payload content.
    fn validate(&self, payload: &serde_json::Value) -> Result<(), String> {
        let _ = payload;
        Ok(())
    }

    /// Asked before every claim (see [`ClaimBudget`]). Must be cheap and must not block.
    fn claim_budget(&self) -> ClaimBudget {
        ClaimBudget::Unlimited
    }

    /// Told right after a claim, with the tenant of each action of this kind the executor is
    /// about to start (reclaims included; actions it gave back excluded), in no particular
    /// order. Called once per claim for each kind that got at least one action. An
    /// adapter with a budget spends it here, so that the next claim, which may come while
    /// these actions still run, already sees it spent. Must be cheap and must not block.
    fn claimed(&self, tenants: &[Option<&str>]) {
        let _ = tenants;
    }

    /// Whether the claim may be this kind's fence (kinds that are not at-most-once only; see
    /// `ExecutorConfig::fence_with_claim`): the claim then records `write_started_at` and
    /// [`Fence::begin_write`](super::Fence::begin_write) answers without a round trip. The
    /// price: a holder that dies anywhere in its attempt leaves the mark, so the next attempt
    /// sees [`Attempt::write_started`]. Answer `false` when that would make the next attempt
    /// give up rather than call again (an adapter that ends UNCERTAIN instead of repeating a
    /// call that may have happened): its fence then records the mark just before the call.
    fn claim_may_fence(&self) -> bool {
        true
    }

    /// Carries out one attempt.
    async fn execute(&self, attempt: &mut Attempt) -> Outcome;
}

/// A registered kind: its adapter and its spec as read at registration.
#[derive(Clone)]
pub(crate) struct Registered {
    pub(crate) adapter: Arc<dyn Adapter>,
    pub(crate) spec: KindSpec,
}

/// Kinds → adapters, built by the application at start-up and shared (`Arc`) by enqueue and the
/// executor. Also holds the enqueue-side settings: the payload bound and the wake-up hint.
#[derive(Clone)]
pub struct Registry {
    kinds: BTreeMap<&'static str, Registered>,
    payload_bytes_max: usize,
    notify: bool,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("kinds", &self.kinds.keys().collect::<Vec<_>>())
            .field("payload_bytes_max", &self.payload_bytes_max)
            .field("notify", &self.notify)
            .finish()
    }
}

impl Registry {
    /// An empty registry: 64 KiB payloads, wake-up hints on.
    pub fn new() -> Registry {
        Registry {
            kinds: BTreeMap::new(),
            payload_bytes_max: PAYLOAD_BYTES_MAX_DEFAULT,
            notify: true,
        }
    }

    /// Registers an adapter for its kind. Refuses an invalid spec and a second adapter for a
    /// kind.
    pub fn register(&mut self, adapter: Arc<dyn Adapter>) -> Result<&mut Registry, Error> {
        let spec = adapter.spec();
        spec.validate()?;
        if self.kinds.contains_key(spec.name) {
            return Err(Error::Config(format!(
                "kind {} already has an adapter",
                spec.name
            )));
        }
        self.kinds.insert(spec.name, Registered { adapter, spec });
        Ok(self)
    }

    /// Sets the payload bound in bytes of canonical JSON (1..=[`PAYLOAD_BYTES_LIMIT`]).
    pub fn set_payload_bytes_max(&mut self, bytes: usize) -> Result<&mut Registry, Error> {
        if !(1..=PAYLOAD_BYTES_LIMIT).contains(&bytes) {
            return Err(Error::Config(format!(
                "payload_bytes_max must be 1..={PAYLOAD_BYTES_LIMIT}"
            )));
        }
        self.payload_bytes_max = bytes;
        Ok(self)
    }

    /// Whether enqueue sends the wake-up hint (`NOTIFY wharf_action`) when it inserts a due
    /// action. On by default; turn it off when enqueue rates are so high that PostgreSQL's
    /// commit-time notify lock matters more than latency (executors then find work by polling).
    pub fn set_notify(&mut self, on: bool) -> &mut Registry {
        self.notify = on;
        self
    }

    /// The payload bound in bytes.
    pub fn payload_bytes_max(&self) -> usize {
        self.payload_bytes_max
    }

    /// Whether enqueue sends the wake-up hint.
    pub fn notify(&self) -> bool {
        self.notify
    }

    /// The registered kind names, sorted.
    pub fn kinds(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.kinds.keys().copied()
    }

    /// A kind's spec.
    pub fn spec(&self, kind: &str) -> Option<&KindSpec> {
        self.kinds.get(kind).map(|r| &r.spec)
    }

    pub(crate) fn get(&self, kind: &str) -> Option<&Registered> {
        self.kinds.get(kind)
    }

    pub(crate) fn all(&self) -> impl Iterator<Item = &Registered> {
        self.kinds.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_a_closed_alphabet() {
        let check = |s: &str, ok: bool| assert_eq!(ErrorCode::new(s).is_ok(), ok, "{s:?}");
        check("smtp_4xx", true);
        check("a", true);
        check(&"a".repeat(64), true);
        check(&"a".repeat(65), false);
        check("", false);
        check("Upper", false);
        check("with space", false);
        check("550 5.1.1 user unknown", false);
        check("http.503-retry_after", true);
    }
}
