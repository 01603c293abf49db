//! Named points where a replica can be made to die, for the fault-injection suite
//! (`crates/wharf-chaos`): a process started with `WHARF_FAIL_POINT=<point>` exits with
//! [`FAIL_POINT_EXIT_CODE`] the first time one of its attempts reaches that point, as abruptly as
//! kill -9 (no shutdown, no give-back, no result recorded), so the suite can place a crash
//! exactly where a random kill rarely lands.
//!
//! Owns: the points' names, reading the variable once, and ending the process. Must not know:
//! what the attempt was doing.
//!
//! Inert unless the variable is set: each point costs one read of a value initialised once.

use std::sync::OnceLock;

/// The exit status of a process that died at its fail point.
pub const FAIL_POINT_EXIT_CODE: i32 = 86;

/// The environment variable that arms a point.
pub const FAIL_POINT_VAR: &str = "WHARF_FAIL_POINT";

/// Where an attempt can be made to die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailPoint {
    /// The claim committed; the adapter has not started (`after_claim`).
    Claimed,
    /// The fence passed; the provider call is about to start (`after_fence`).
    Fenced,
    /// The adapter returned (the provider answered); the result is not recorded yet
    /// (`after_answer`).
    Answered,
}

impl FailPoint {
    const ALL: [FailPoint; 3] = [FailPoint::Claimed, FailPoint::Fenced, FailPoint::Answered];

    fn name(self) -> &'static str {
        match self {
            FailPoint::Claimed => "after_claim",
            FailPoint::Fenced => "after_fence",
            FailPoint::Answered => "after_answer",
        }
    }
}

static ARMED: OnceLock<Option<FailPoint>> = OnceLock::new();

/// The armed point, read from the environment once. An unknown name arms nothing and says so.
pub(crate) fn armed() -> Option<FailPoint> {
    *ARMED.get_or_init(|| {
        let value = std::env::var(FAIL_POINT_VAR).ok()?;
        let point = FailPoint::ALL.into_iter().find(|p| p.name() == value);
        if point.is_none() {
            tracing::error!(
                value,
                "{FAIL_POINT_VAR} names no fail point; nothing is armed"
            );
        }
        point
    })
}

/// Ends the process here if `point` is armed.
pub(crate) fn reached(point: FailPoint, action_id: i64) {
    if armed() == Some(point) {
        // stderr directly: the log pipeline may be buffered, and nothing after this runs.
        eprintln!(
            "wharf: fail point {} reached by action {action_id}; exiting",
            point.name()
        );
        std::process::exit(FAIL_POINT_EXIT_CODE);
    }
}

/// The armed point's name, for the start-up warning.
pub(crate) fn armed_name() -> Option<&'static str> {
    armed().map(FailPoint::name)
}
