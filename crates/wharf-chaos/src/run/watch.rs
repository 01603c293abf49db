//! What the harness watches while a run goes on and as it ends: replicas that exited on their
//! own (restarted, and recorded as a finding), the outbox sampled every second, and the quiet
//! drain that waits for every action to end.
//!
//! Owns: those three loops and their intervals. Must not know: the faults' schedules
//! (`faults.rs`) or the load.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sqlx::{PgPool, Row as _};

use super::{FaultKind, Sample, Shared};
use crate::procs::{Launch, run_once};

/// Notices replicas that exited on their own and starts them again (a crash of wharf is a
/// finding, not a reason to stop the run).
pub(crate) async fn watch(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut replicas = shared.replicas.lock().unwrap_or_else(|e| e.into_inner());
        for replica in replicas.iter_mut() {
            if replica.terminating {
                continue;
            }
            if let Some(status) = replica.exited() {
                shared
                    .unexpected_exits
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(format!("{} exited with {status}", replica.name));
                let _ = replica.kill_and_restart();
            }
        }
    }
}

/// Every second: how many actions are EXECUTING, and how many of those hold a lease that
/// already expired (the database clock), the oldest for how long. A reclaim is due at once
/// (SPEC §2.3); what this sees is how late it comes.
pub(crate) async fn sample(shared: Arc<Shared>, pool: PgPool) {
    for second in 1u64.. {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if second % 30 == 0 {
            let faults: Vec<u32> = FaultKind::ALL.iter().map(|&k| shared.count(k)).collect();
            eprintln!(
                "wharf-chaos: {second} s: {} enqueued, {} calls finished, faults \
                 kill/pause/terminate/restart/after_claim/after_fence/after_answer/cut/sigterm {faults:?}",
                shared.enqueued.load(Ordering::Relaxed),
                shared.recorder.finished.load(Ordering::Relaxed),
            );
        }
        let row = sqlx::query(
            "SELECT count(*),
                    count(*) FILTER (WHERE lease_expires_at < now()),
                    COALESCE(EXTRACT(EPOCH FROM now() - min(lease_expires_at)
                             FILTER (WHERE lease_expires_at < now())) * 1000, 0)::bigint
               FROM wharf.action_live WHERE state = 'EXECUTING'",
        )
        .fetch_one(&pool)
        .await;
        if let Ok(row) = row {
            let sample = Sample {
                at_us: shared.clock.now_us(),
                executing: row.get(0),
                expired: row.get(1),
                expired_for_ms: row.get(2),
            };
            shared
                .samples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(sample);
        }
    }
}

/// Waits until every action ended: replicas run, providers answer; after a while without
/// progress, `wharf drain` makes retries that wait for their backoff due at once.
pub(crate) async fn settle(
    shared: &Shared,
    pool: &PgPool,
    launch: &Launch,
    deadline: Instant,
) -> anyhow::Result<()> {
    let mut last = i64::MAX;
    let mut still = 0;
    loop {
        let open: Result<i64, _> = sqlx::query_scalar("SELECT count(*) FROM wharf.action_live")
            .fetch_one(pool)
            .await;
        if let Ok(open) = open {
            if open == 0 && shared.enqueued.load(Ordering::Relaxed) > 0 {
                return Ok(());
            }
            if open < last {
                still = 0;
            } else {
                still += 1;
            }
            last = open;
        }
        if still >= 5 {
            // Everything left waits for a backoff (or a lease): make it due.
            let launch = launch.clone();
            let _ = tokio::task::spawn_blocking(move || {
                run_once(&launch, &["drain"], Duration::from_secs(120))
            })
            .await;
            still = 0;
        }
        if Instant::now() > deadline {
            return Ok(()); // the checker reports what did not end
        }
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
}
