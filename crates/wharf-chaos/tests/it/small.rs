//! The small chaos run in `cargo test`: real `wharf work` ×3 and `wharf serve` (the binary
//! `cargo test` built beside this test), every fault kind a few times, and the checker finds
//! nothing. The checker itself is tested against seeded violations in `src/check.rs`.

use wharf_chaos::run::{FaultKind, Settings};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_run_under_every_fault_breaks_no_promise() {
    let wharf = wharf_chaos::procs::locate_wharf().expect("the wharf binary");
    let settings = Settings::small();
    let outcome = wharf_chaos::run::run(settings.clone(), wharf, None)
        .await
        .expect("the run completes");
    let summary = wharf_chaos::report::summarize(&outcome);
    let text = wharf_chaos::report::markdown(&summary);
    // Every rule, the stale-holder ones included: RELIABILITY.md finding 1 is fixed by the
    // adapters' deadline check before each provider write (wharf-adapters `deadline.rs`).
    let broken = &outcome.violations;
    assert!(
        broken.is_empty(),
        "{text}\n{:#?}",
        &broken[..broken.len().min(20)]
    );
    // The run did what it says: every action, every envelope, every fault kind.
    assert_eq!(summary.actions as u64, settings.actions, "{text}");
    assert_eq!(
        summary.envelopes as u64,
        settings.envelopes_per_producer * u64::from(settings.producers),
        "{text}"
    );
    for kind in FaultKind::ALL {
        let name = wharf_chaos::report::kind_name(kind);
        let count = summary.faults.get(name).copied().unwrap_or(0);
        assert!(
            count >= settings.faults_per_kind as usize,
            "{name}: {count}\n{text}"
        );
    }
    assert!(
        outcome.provider_faults.values().sum::<u64>() > 0,
        "no provider fault was answered\n{text}"
    );
    assert!(outcome.unexpected_exits.is_empty(), "{text}");
}
