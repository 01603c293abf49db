//! The running executor's own machinery: fences asked together and decided row by row, and
//! claim-ahead (held actions given back on shutdown, and when they waited too long for a slot),
//! and a start while the database is down.
//!
//! These run `Executor::run` on the real clock. Nothing asserts a duration: the adapter below
//! waits at a gate the test opens, and the test waits on database state.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinHandle;
use wharf::outbox::{
    ActionRequest, ActionState, Adapter, Attempt, Backoff, Executor, ExecutorConfig, FenceRefused,
    KindSpec, Outcome, Registry, erase_subject,
};
use wharf_testkit::TestDb;

use super::support::{config, durable_fence_config, view};

const GATED: &str = "gated";

/// Every attempt waits at `gate` (before its fence, or after it with `fence_first`) and records
/// what the fence said.
struct Gated {
    call_timeout_ms: u64,
    fence_first: bool,
    gate: Semaphore,
    arrived: AtomicUsize,
    fences: Mutex<Vec<(i64, Result<(), String>)>>,
}

impl Gated {
    fn new(call_timeout_ms: u64, fence_first: bool) -> Arc<Gated> {
        Arc::new(Gated {
            call_timeout_ms,
            fence_first,
            gate: Semaphore::new(0),
            arrived: AtomicUsize::new(0),
            fences: Mutex::new(Vec::new()),
        })
    }

    fn open(&self, n: usize) {
        self.gate.add_permits(n);
    }

    fn fences(&self) -> Vec<(i64, Result<(), String>)> {
        self.fences.lock().unwrap().clone()
    }
}

#[async_trait]
impl Adapter for Gated {
    fn spec(&self) -> KindSpec {
        KindSpec {
            name: GATED,
            at_most_once: false,
            instance_level: false,
            max_attempts_default: 3,
            backoff: Backoff::default(),
            call_timeout_ms: self.call_timeout_ms,
        }
    }

    async fn execute(&self, attempt: &mut Attempt) -> Outcome {
        self.arrived.fetch_add(1, Ordering::SeqCst);
        let id = attempt.action_id();
        let mut answer = None;
        if self.fence_first {
            answer = Some(attempt.fence().begin_write().await);
        }
        if let Ok(permit) = self.gate.acquire().await {
            permit.forget();
        }
        let answer = match answer {
            Some(answer) => answer,
            None => attempt.fence().begin_write().await,
        };
        let done = answer.is_ok();
        let seen = answer.map_err(|refused| match refused {
            FenceRefused::Gone => "gone".to_owned(),
            other => other.to_string(),
        });
        self.fences.lock().unwrap().push((id, seen));
        if done {
            Outcome::Done { readback_ref: None }
        } else {
            Outcome::Abandoned
        }
    }
}

fn registry(adapter: &Arc<Gated>) -> Arc<Registry> {
    let mut r = Registry::new();
    r.register(adapter.clone()).unwrap();
    Arc::new(r)
}

async fn enqueue_lanes(pool: &PgPool, registry: &Registry, n: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut conn = pool.acquire().await.unwrap();
    for i in 0..n {
        let r = ActionRequest::new(GATED, format!("lane-{i}"), format!("key-{i}"), json!({}))
            .tenant("t1")
            .subject(format!("account-{i}"));
        ids.push(
            wharf::outbox::enqueue(&mut conn, registry, r)
                .await
                .unwrap()
                .id,
        );
    }
    ids
}

fn start(
    executor: &Executor,
) -> (
    oneshot::Sender<()>,
    JoinHandle<Result<(), wharf::outbox::Error>>,
) {
    let (stop, stopped) = oneshot::channel::<()>();
    let executor = executor.clone();
    let running = tokio::spawn(async move {
        executor
            .run(async {
                let _ = stopped.await;
            })
            .await
    });
    (stop, running)
}

/// Waits (bounded) until `check` holds.
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..3_000 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

async fn count_in(pool: &PgPool, state: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM wharf.action WHERE state = $1")
        .bind(state)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn fences_asked_together_are_decided_row_by_row() {
    let db = TestDb::new().await;
    let gated = Gated::new(10_000, false);
    let registry = registry(&gated);
    let ids = enqueue_lanes(&db.pool, &registry, 8).await;
    let mut c = durable_fence_config();
    c.lease_ms = 60_000;
    c.fence_margin_ms = 20_000;
    let executor = Executor::new(db.pool.clone(), registry.clone(), c).unwrap();
    let (stop, running) = start(&executor);

    until("all eight attempts wait at the gate", async || {
        gated.arrived.load(Ordering::SeqCst) == 8
    })
    .await;
    // One action is erased while its attempt waits: its fence must refuse, the others pass,
    // whichever statement carries them.
    assert_eq!(erase_subject(&db.pool, "account-3").await.unwrap(), 1);
    gated.open(8);
    until("every action ended", async || {
        count_in(&db.pool, "DONE").await == 7
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    let fences = gated.fences();
    assert_eq!(fences.len(), 8);
    for (id, seen) in fences {
        if id == ids[3] {
            assert_eq!(seen, Err("gone".to_owned()));
        } else {
            assert_eq!(seen, Ok(()), "action {id}");
            let v = view(&db.pool, id).await;
            assert_eq!((v.state, v.attempt), (ActionState::Done, 1));
        }
    }
    let started: i64 =
        sqlx::query_scalar("SELECT count(*) FROM wharf.action WHERE write_started_at IS NOT NULL")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(started, 7);
}

#[tokio::test]
async fn shutdown_gives_back_actions_held_for_a_slot() {
    let db = TestDb::new().await;
    let gated = Gated::new(10_000, false);
    let registry = registry(&gated);
    let ids = enqueue_lanes(&db.pool, &registry, 5).await;
    let mut c = config();
    c.lease_ms = 60_000;
    c.fence_margin_ms = 20_000;
    c.concurrency_max = 1;
    c.per_kind_concurrency_max = 1;
    c.claim_ahead_max = 4;
    c.shutdown_grace_ms = 30_000;
    let executor = Executor::new(db.pool.clone(), registry.clone(), c).unwrap();
    let (stop, running) = start(&executor);

    // One runs (at the gate); the other four are claimed and held for its slot.
    until("one runs and four are held", async || {
        gated.arrived.load(Ordering::SeqCst) == 1 && count_in(&db.pool, "EXECUTING").await == 5
    })
    .await;
    stop.send(()).unwrap();
    // The running one finishes within the grace; the held ones never start.
    gated.open(5);
    running.await.unwrap().unwrap();
    assert_eq!(gated.arrived.load(Ordering::SeqCst), 1);

    let mut done = 0;
    for id in &ids {
        let v = view(&db.pool, *id).await;
        match v.state {
            ActionState::Done => {
                done += 1;
                assert_eq!(v.attempt, 1);
            }
            // Given back: due again, claimed once (epoch 1) but no attempt counted.
            ActionState::Admitted => assert_eq!((v.attempt, v.epoch), (0, 1), "action {id}"),
            other => panic!("action {id} is {other:?}"),
        }
    }
    assert_eq!(done, 1);

    // And nothing is lost: a drain runs the rest, one attempt each.
    executor.drain().await.unwrap();
    for id in &ids {
        let v = view(&db.pool, *id).await;
        assert_eq!((v.state, v.attempt), (ActionState::Done, 1), "action {id}");
    }
}

#[tokio::test]
async fn an_action_held_too_long_for_a_slot_is_given_back_unrun() {
    let db = TestDb::new().await;
    // Lease 4 s, margin 3 s: an action may wait (4 − 3) / 2 = 0.5 s for a slot. The running
    // attempt passes its fence at once and then holds its slot at the gate (call timeout
    // 2.9 s), so the held one waits past its bound.
    let gated = Gated::new(2_900, true);
    let registry = registry(&gated);
    let ids = enqueue_lanes(&db.pool, &registry, 2).await;
    let mut c = config();
    c.lease_ms = 4_000;
    c.fence_margin_ms = 3_000;
    c.concurrency_max = 1;
    c.per_kind_concurrency_max = 1;
    c.claim_ahead_max = 1;
    let executor = Executor::new(db.pool.clone(), registry.clone(), c).unwrap();
    let (stop, running) = start(&executor);

    // The held action waits past its bound while the first still runs: it is given back
    // (ADMITTED, no attempt counted) and claimed again before it ever starts.
    until(
        "a held action was given back and claimed again",
        async || {
            let epoch: i64 = sqlx::query_scalar("SELECT max(epoch) FROM wharf.action")
                .fetch_one(&db.pool)
                .await
                .unwrap();
            epoch >= 2
        },
    )
    .await;
    assert_eq!(gated.arrived.load(Ordering::SeqCst), 1);
    gated.open(2);
    until("both actions ended", async || {
        count_in(&db.pool, "DONE").await == 2
    })
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();

    let mut given_back = 0;
    for id in &ids {
        let v = view(&db.pool, *id).await;
        // Every action ran exactly once, whatever it waited through.
        assert_eq!((v.state, v.attempt), (ActionState::Done, 1), "action {id}");
        if v.epoch >= 2 {
            given_back += 1;
        }
    }
    assert!(given_back >= 1);
    assert_eq!(gated.fences().len(), 2);
}

#[test]
fn claim_ahead_is_bounded() {
    let registry = Registry::new();
    let mut c = ExecutorConfig::default();
    c.claim_ahead_max = 10_000;
    assert!(c.validate(&registry).is_ok());
    c.claim_ahead_max = 10_001;
    assert!(c.validate(&registry).is_err());
    c.claim_ahead_max = 0;
    assert!(c.validate(&registry).is_ok());
}

/// A TCP door in front of PostgreSQL: while shut it accepts each connection and closes it at
/// once (a database that is down or restarting, as a client sees it); once opened it forwards
/// every byte both ways.
struct Door {
    port: u16,
    open: Arc<AtomicBool>,
    refused: Arc<AtomicUsize>,
}

impl Door {
    async fn shut_in_front_of(url: &str) -> Door {
        let options: PgConnectOptions = url.parse().unwrap();
        let upstream = format!("{}:{}", options.get_host(), options.get_port());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (open, refused) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let (o, r) = (open.clone(), refused.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !o.load(Ordering::SeqCst) {
                    r.fetch_add(1, Ordering::SeqCst);
                    drop(client);
                    continue;
                }
                let Ok(mut server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
            }
        });
        Door {
            port,
            open,
            refused,
        }
    }
}

/// `run` started while its database cannot be reached neither fails nor gives up: it keeps
/// trying (claims and the NOTIFY listener alike) and runs the work once the database answers.
#[tokio::test]
async fn run_started_while_the_database_is_down_runs_the_work_once_it_is_up() {
    let db = TestDb::new().await;
    let gated = Gated::new(1_000, false);
    gated.open(1);
    let registry = registry(&gated);
    let door = Door::shut_in_front_of(&db.url()).await;
    let options: PgConnectOptions = db.url().parse().unwrap();
    let behind_door = PgPoolOptions::new()
        .max_connections(4)
        .connect_lazy_with(options.port(door.port));
    let mut c = config();
    c.notify = true;
    let executor = Executor::new(behind_door, registry.clone(), c).unwrap();
    let (stop, running) = start(&executor);

    // The work is enqueued on the application's own connection, which reaches the database.
    let ids = enqueue_lanes(&db.pool, &registry, 1).await;
    until("the executor has been refused a few times", async || {
        door.refused.load(Ordering::SeqCst) >= 3
    })
    .await;
    assert!(
        !running.is_finished(),
        "run ended while the database was down"
    );
    assert_eq!(count_in(&db.pool, "ADMITTED").await, 1, "nothing ran yet");

    door.open.store(true, Ordering::SeqCst);
    until("the action ran", async || {
        count_in(&db.pool, "DONE").await == 1
    })
    .await;
    assert_eq!(gated.arrived.load(Ordering::SeqCst), 1);
    let v = view(&db.pool, ids[0]).await;
    assert_eq!((v.state, v.attempt), (ActionState::Done, 1));
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}
