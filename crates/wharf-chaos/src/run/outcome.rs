//! What a run returns: the settings, the evidence and what the checker found, the faults
//! injected, the outbox sampled every second, how long the load and the drain took.
//!
//! Owns: [`Outcome`], [`FaultEvent`], [`Sample`] (serialized as the kept run's
//! `outcome.json`). Must not know: how any of it was gathered, nor how it is reported.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{FaultKind, Settings};
use crate::check::{self, Evidence};

/// One injected fault.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultEvent {
    /// Its kind.
    pub kind: FaultKind,
    /// When it began, run microseconds.
    pub at_us: i64,
    /// When it was over (the process restarted, resumed, the database answered again).
    pub over_us: i64,
    /// What it hit (a replica's name, how many backends).
    pub target: String,
}

/// The database's view of the outbox at one moment (sampled every second during the load).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    /// When, run microseconds.
    pub at_us: i64,
    /// Actions EXECUTING.
    pub executing: i64,
    /// Of those, how many have a lease that expired (waiting to be reclaimed).
    pub expired: i64,
    /// How long ago the oldest of those leases expired, milliseconds.
    pub expired_for_ms: i64,
}

/// What a run produced.
#[derive(Debug, Serialize, Deserialize)]
pub struct Outcome {
    /// The settings it ran with.
    pub settings: Settings,
    /// Everything the checker looked at.
    pub evidence: Evidence,
    /// The faults, in order.
    pub faults: Vec<FaultEvent>,
    /// Provider faults answered, by kind (`http_4xx`, `http_5xx`, `http_timeout`,
    /// `smtp_550`, `smtp_451`, `smtp_timeout`).
    pub provider_faults: BTreeMap<String, u64>,
    /// What the checker found.
    pub violations: Vec<check::Violation>,
    /// Seconds under load (faults on), and of the final drain.
    pub load_s: f64,
    /// Seconds of the final drain.
    pub drain_s: f64,
    /// Replicas that exited without being told to (a crash of wharf itself).
    pub unexpected_exits: Vec<String>,
    /// The outbox every second.
    pub samples: Vec<Sample>,
    /// The run's directory (logs), when kept.
    pub dir: Option<PathBuf>,
}
