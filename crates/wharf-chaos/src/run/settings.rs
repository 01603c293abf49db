//! What a run does: its sizes, rates, lease and deadline ([`Settings`], a small one for
//! `cargo test` and the big one RELIABILITY.md reports), and the kinds of fault it injects.
//!
//! Owns: [`Settings`], [`FaultKind`]. Must not know: how a fault is injected (`faults.rs`) or
//! what the load is.

use serde::{Deserialize, Serialize};

/// What a run does. [`Settings::small`] fits in `cargo test`; [`Settings::big`] is the run
/// RELIABILITY.md reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    /// Actions to enqueue (emails, webhooks, deduplicated webhooks: 3 : 4 : 3).
    pub actions: u64,
    /// Lanes they are spread over.
    pub lanes: u32,
    /// `wharf work` replicas (beside `wharf serve`, which runs an executor too).
    pub workers: u32,
    /// Inbox producers (one stream each).
    pub producers: u32,
    /// Envelopes each producer sends.
    pub envelopes_per_producer: u64,
    /// Faults of each process/database kind to inject at least (the run goes on until every
    /// kind reached it and the load is done).
    pub faults_per_kind: u32,
    /// Mean milliseconds between two faults of one kind.
    pub fault_interval_ms: u64,
    /// Provider faults per thousand calls: refusals (4xx / 550), temporary failures
    /// (5xx / 451), stalls past the client's timeout.
    pub provider_permille: [u64; 3],
    /// The executor's lease. SIGSTOP pauses last longer than this.
    pub lease_ms: u64,
    /// Actions in flight (enqueued, not yet called) the feeder keeps at most.
    pub backlog_max: u64,
    /// The whole run, drain included, must end by then.
    pub deadline_s: u64,
    /// Milliseconds PostgreSQL stays down in a restart: uniform in [min, max].
    pub restart_down_ms: [u64; 2],
    /// The fault kinds to inject (all four by default).
    pub kinds: Vec<FaultKind>,
    /// The executor's longest idle poll interval (`[executor] poll_interval_ms_max`); short by
    /// default so a quiet replica notices work soon, 2000 is wharf's own default.
    pub poll_interval_ms_max: u64,
    /// Claim statements each replica keeps in flight (`[executor] claims_in_flight_max`,
    /// 1..=4); 1 is wharf's default, 2 puts a claim beside another under the faults.
    pub claims_in_flight_max: u32,
}

impl Settings {
    /// A run of 30–40 s: enough of each fault to exercise every path once or twice.
    pub fn small() -> Settings {
        Settings {
            actions: 1_500,
            lanes: 60,
            workers: 3,
            producers: 3,
            envelopes_per_producer: 120,
            faults_per_kind: 3,
            fault_interval_ms: 2_500,
            provider_permille: [10, 30, 10],
            lease_ms: 8_000,
            backlog_max: 600,
            deadline_s: 170,
            restart_down_ms: [200, 1_500],
            kinds: FaultKind::ALL.to_vec(),
            poll_interval_ms_max: 500,
            claims_in_flight_max: 1,
        }
    }

    /// The RELIABILITY.md run: 100,000 actions, at least 100 faults of each kind.
    pub fn big() -> Settings {
        Settings {
            actions: 100_000,
            lanes: 600,
            workers: 4,
            producers: 8,
            envelopes_per_producer: 2_500,
            faults_per_kind: 100,
            fault_interval_ms: 3_000,
            provider_permille: [5, 20, 5],
            lease_ms: 8_000,
            backlog_max: 4_000,
            deadline_s: 4 * 3_600,
            restart_down_ms: [200, 2_000],
            kinds: FaultKind::ALL.to_vec(),
            poll_interval_ms_max: 500,
            claims_in_flight_max: 1,
        }
    }
}

/// A fault the harness injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// kill -9 of a replica, then a restart.
    Kill,
    /// SIGSTOP of a worker past its lease, then SIGCONT.
    Pause,
    /// `pg_terminate_backend` of about half of wharf's connections.
    TerminateBackends,
    /// PostgreSQL `stop -m immediate`, down a while, started again (crash recovery).
    PostgresRestart,
    /// An extra replica that dies at its first attempt whose claim committed, before the
    /// adapter starts (the named point `after_claim`).
    AfterClaim,
    /// An extra replica that dies right after a fence passed, before the provider call
    /// (`after_fence`).
    AfterFence,
    /// An extra replica that dies after the provider answered, before the result is recorded
    /// (`after_answer`).
    AfterAnswer,
    /// The wires between the replicas and both providers are cut for a while: open connections
    /// are reset, new ones refused with a reset (`wire.rs`).
    NetworkCut,
    /// SIGTERM of a random replica (`serve` included): a graceful shutdown in the middle of the
    /// load, then a restart. It must exit cleanly and lose nothing.
    Sigterm,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::Kill,
        FaultKind::Pause,
        FaultKind::TerminateBackends,
        FaultKind::PostgresRestart,
        FaultKind::AfterClaim,
        FaultKind::AfterFence,
        FaultKind::AfterAnswer,
        FaultKind::NetworkCut,
        FaultKind::Sigterm,
    ];

    /// The `WHARF_FAIL_POINT` a named-point kind arms.
    pub(crate) fn fail_point(self) -> Option<&'static str> {
        match self {
            FaultKind::AfterClaim => Some("after_claim"),
            FaultKind::AfterFence => Some("after_fence"),
            FaultKind::AfterAnswer => Some("after_answer"),
            _ => None,
        }
    }
}
