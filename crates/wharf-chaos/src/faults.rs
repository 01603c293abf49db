//! The fault injectors of a run: one loop per fault kind, each on its own random schedule.
//!
//! Owns: how each kind is injected (which replica, how long, what counts as one fault) and the
//! fail-point replicas. Must not know: the load, the evidence, or the rules (`run.rs`, `check.rs`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::bail;
use rand::Rng as _;
use rand::seq::SliceRandom as _;
use sqlx::PgPool;

use crate::procs::{Launch, Replica};
use crate::run::{FaultKind, HARNESS_APPLICATION, Shared};

/// How long a network cut lasts: uniform in this range, from shorter than a provider call's
/// timeouts (a reset mid-call) to longer (connections refused for several tries).
const NETWORK_CUT_MS: [u64; 2] = [300, 3_000];

/// How long a replica armed with a fail point may run without reaching it before it is
/// stopped and the try is not counted (no work reached that point meanwhile).
const FAIL_POINT_WAIT: Duration = Duration::from_secs(15);

/// One fault injector: faults of `kind` at random moments (uniform around the mean
/// interval) until the load is done and at least `faults_per_kind` were injected.
pub(crate) async fn inject(shared: Arc<Shared>, pool: PgPool, kind: FaultKind) {
    let settings = &shared.settings;
    loop {
        // A fail-point replica leaves what it claimed behind for a lease each time, so those
        // stop at their count; the others go on while the load lasts.
        let enough = shared.count(kind) >= settings.faults_per_kind;
        if enough && (kind.fail_point().is_some() || shared.load_done.load(Ordering::SeqCst)) {
            return;
        }
        let wait = {
            let mean = settings.fault_interval_ms;
            if kind.fail_point().is_some() {
                // A fail-point try needs work to reach its point, which only the load brings:
                // four times as often, so the count is reached while the load lasts.
                rand::thread_rng().gen_range(0..=mean / 2)
            } else {
                rand::thread_rng().gen_range(mean / 2..=mean + mean / 2)
            }
        };
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let at_us = shared.clock.now_us();
        match kind {
            FaultKind::Kill => {
                let name = {
                    let mut replicas = shared.replicas.lock().unwrap_or_else(|e| e.into_inner());
                    // serve is a replica too (its executor and the inbox), hit as often as
                    // any one worker. Not one in its graceful shutdown: the SIGTERM fault
                    // waits for that process's own exit, and a kill would replace it.
                    let candidates: Vec<usize> = (0..replicas.len())
                        .filter(|&i| !replicas[i].terminating)
                        .collect();
                    let Some(&i) = candidates.choose(&mut rand::thread_rng()) else {
                        continue;
                    };
                    let replica = &mut replicas[i];
                    if replica.kill_and_restart().is_err() {
                        continue;
                    }
                    replica.name.clone()
                };
                shared.record(kind, at_us, name);
            }
            FaultKind::Pause => {
                let chosen = {
                    let mut replicas = shared.replicas.lock().unwrap_or_else(|e| e.into_inner());
                    let paused = replicas.iter().filter(|r| r.stopped).count();
                    let limit = (settings.workers as usize).div_ceil(2);
                    let candidates: Vec<usize> = replicas
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| r.name != "serve" && !r.stopped && !r.terminating)
                        .map(|(i, _)| i)
                        .collect();
                    match candidates.choose(&mut rand::thread_rng()) {
                        Some(&i) if paused < limit => {
                            replicas[i].pause();
                            Some((i, replicas[i].name.clone(), replicas[i].pid()))
                        }
                        _ => None,
                    }
                };
                let Some((i, name, pid)) = chosen else {
                    continue;
                };
                // Past the lease, so another replica reclaims what it held; resumed in the
                // background while other pauses may begin.
                let hold = settings.lease_ms + rand::thread_rng().gen_range(1_000..3_000);
                let shared = shared.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(hold)).await;
                    {
                        let mut replicas =
                            shared.replicas.lock().unwrap_or_else(|e| e.into_inner());
                        // Killed and restarted meanwhile: that process was never paused.
                        if replicas[i].pid() == pid {
                            replicas[i].resume();
                        }
                    }
                    shared.record(kind, at_us, name);
                });
            }
            FaultKind::TerminateBackends => {
                let killed: Result<i64, _> = sqlx::query_scalar(
                    "SELECT count(*) FROM (
                         SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity
                          WHERE datname = current_database() AND pid <> pg_backend_pid()
                            AND application_name <> $1 AND backend_type = 'client backend'
                            AND random() < 0.5) s
                      WHERE t",
                )
                .bind(HARNESS_APPLICATION)
                .fetch_one(&pool)
                .await;
                // Not counted while the database is down (a restart is under way).
                if let Ok(killed) = killed {
                    shared.record(kind, at_us, format!("{killed} backends"));
                }
            }
            FaultKind::AfterClaim | FaultKind::AfterFence | FaultKind::AfterAnswer => {
                let Some(point) = kind.fail_point() else {
                    continue;
                };
                let n = shared.count(kind) + 1;
                let name = format!("{point}-{n}");
                let launch = shared.launch.clone();
                let died = tokio::task::spawn_blocking(move || die_at(&launch, &name, point)).await;
                match died {
                    Ok(Ok(Some(target))) => shared.record(kind, at_us, target),
                    // No work reached the point, and after the load none will come.
                    Ok(Ok(None)) if shared.load_done.load(Ordering::SeqCst) => return,
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => eprintln!("wharf-chaos: fail point replica: {e}"),
                    Err(e) => eprintln!("wharf-chaos: fail point replica panicked: {e}"),
                }
            }
            FaultKind::Sigterm => {
                let (i, name) = {
                    let mut replicas = shared.replicas.lock().unwrap_or_else(|e| e.into_inner());
                    let i = rand::thread_rng().gen_range(0..replicas.len());
                    replicas[i].terminate();
                    (i, replicas[i].name.clone())
                };
                // Its graceful shutdown: give-backs, the grace for running attempts (2 s), then
                // the exit; bounded, after which it is killed (and that is reported).
                let deadline = Instant::now() + Duration::from_secs(20);
                let status = loop {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let mut replicas = shared.replicas.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(status) = replicas[i].exited() {
                        let _ = replicas[i].restart();
                        break Some(status);
                    }
                    if Instant::now() > deadline {
                        let _ = replicas[i].restart();
                        break None;
                    }
                };
                match status {
                    Some(status) if status.success() => {}
                    // Ended by the signal itself: it came before the replica registered its
                    // handlers (it had just been started by another fault), so it held nothing
                    // yet. Seen twice in a big run; not a failed graceful stop.
                    Some(status)
                        if std::os::unix::process::ExitStatusExt::signal(&status)
                            == Some(libc::SIGTERM) => {}
                    other => shared
                        .unexpected_exits
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(format!("{name} after SIGTERM: {other:?}")),
                }
                shared.record(kind, at_us, name);
            }
            FaultKind::NetworkCut => {
                let [min, max] = NETWORK_CUT_MS;
                let down = Duration::from_millis(rand::thread_rng().gen_range(min..=max));
                let [http, smtp] = &shared.wires;
                tokio::join!(http.cut(down), smtp.cut(down));
                shared.record(kind, at_us, format!("cut {down:?}"));
            }
            FaultKind::PostgresRestart => {
                let [min, max] = settings.restart_down_ms;
                let down = Duration::from_millis(rand::thread_rng().gen_range(min..=max));
                let worker = shared.clone();
                let done =
                    tokio::task::spawn_blocking(move || worker.cluster.crash_restart(down)).await;
                match done {
                    Ok(Ok(())) => shared.record(kind, at_us, format!("down {down:?}")),
                    Ok(Err(e)) => eprintln!("wharf-chaos: PostgreSQL restart failed: {e}"),
                    Err(e) => eprintln!("wharf-chaos: PostgreSQL restart panicked: {e}"),
                }
            }
        }
    }
}

/// Starts an extra `wharf work` replica armed with `point` and waits for it to die there.
/// `Some(target)` when it did; `None` when it reached no such point in [`FAIL_POINT_WAIT`]
/// (it is stopped then, and the try is not a fault).
fn die_at(launch: &Launch, name: &str, point: &str) -> anyhow::Result<Option<String>> {
    let mut replica = Replica::start_armed(name, launch, &["work"], point)?;
    let deadline = Instant::now() + FAIL_POINT_WAIT;
    while Instant::now() < deadline {
        if let Some(status) = replica.exited() {
            if status.code() == Some(wharf::outbox::FAIL_POINT_EXIT_CODE) {
                return Ok(Some(name.to_owned()));
            }
            bail!("{name} exited with {status} before reaching {point}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    replica.stop();
    Ok(None)
}
