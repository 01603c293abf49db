//! `wharf bench outbox`: enqueue N no-op actions with `enqueue_many`, drain them with the real
//! executor (claim, fence, complete — full fencing included), and put the drain rate beside
//! the pgbench ceiling of the same SQL path, measured in the same run (bench/DESIGN.md §3).
//! With `--backlog B1,B2,…` it sweeps claim cost across backlog sizes instead (`outbox/backlog.rs`).
//!
//! Owns: the `bench.noop` kind and its adapter ([`NoopAdapter`], also used by `bench latency`),
//! clean starts of the bench rows, the enqueue and prefill phases, the drain and its checks.
//! What it prints (JSON rows, summaries, tables) is `outbox/table.rs`.
//! Must not know: the executor's internals — it runs [`Executor::run`] as `wharf work` would and
//! reads the executor's own metrics through [`super::recorder`].

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use wharf::outbox::{
    ActionRequest, Adapter, Attempt, Backoff, CLAIM_BATCH_LIMIT, ENQUEUE_BATCH_MAX, Executor,
    ExecutorConfig, KindSpec, Outcome, Registry, enqueue_many, metrics as names,
};

use super::ceiling::{self, CeilingChoice, Measured, Script};
use super::recorder::{self, Seen};
use super::report::{self, Machine};
use super::stats::{median, ratio};
use super::{Deadline, OnOff};
use crate::Database;

mod backlog;
mod table;

use table::{ceiling_summary, field, print_plain, print_sweep, row_json, summary_json};

/// The kind every benchmark action has.
pub(crate) const KIND: &str = "bench.noop";
/// Histogram of the adapter's `begin_write()` call, in seconds (recorded by [`NoopAdapter`]).
pub(crate) const FENCE_SECONDS: &str = "wharf_bench_fence_seconds";
/// Rows one prefill statement inserts: `enqueue_many`'s maximum, one transaction each.
pub(crate) const PREFILL_BATCH: usize = ENQUEUE_BATCH_MAX;
/// Connections the prefill uses at once.
pub(crate) const PREFILL_CONNECTIONS: usize = 2;
/// Rows one clean-up statement deletes.
const CLEAN_BATCH: i64 = 10_000;
/// Rough size of one action row with its index entries, for the prefill's announcement.
const ROW_BYTES_ESTIMATE: u64 = 600;

/// Called by the adapter with the payload as it starts an attempt (`bench latency`).
pub(crate) type StartProbe = Arc<dyn Fn(&Value) + Send + Sync>;

/// The no-op adapter: reports its start to the probe, passes the fence (`begin_write()`, timed) and answers
/// Done. A refused fence is counted and fails the run. It also checks the lanes as it runs: an
/// attempt that starts while another of its lane runs, or that starts an action with a lower id
/// than one its lane already started, is a lane violation (also counted; it fails the run).
#[derive(Default)]
pub(crate) struct NoopAdapter {
    refused: AtomicU64,
    lane_violations: AtomicU64,
    /// Per lane: the highest action id started and whether an attempt of the lane runs now.
    lanes: std::sync::Mutex<std::collections::HashMap<String, (i64, bool)>>,
    probe: RwLock<Option<StartProbe>>,
}

impl NoopAdapter {
    /// Lane violations seen so far (overlaps and out-of-order starts).
    pub(crate) fn lane_violations(&self) -> u64 {
        self.lane_violations.load(Ordering::Relaxed)
    }

    fn lane_enter(&self, lane: &str, id: i64) {
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        let entry = lanes.entry(lane.to_owned()).or_insert((i64::MIN, false));
        if entry.1 || id < entry.0 {
            self.lane_violations.fetch_add(1, Ordering::Relaxed);
        }
        *entry = (entry.0.max(id), true);
    }

    fn lane_leave(&self, lane: &str) {
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = lanes.get_mut(lane) {
            entry.1 = false;
        }
    }

    /// Fences refused so far.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Sets (or clears) the start probe.
    pub(crate) fn set_probe(&self, probe: Option<StartProbe>) {
        *self.probe.write().unwrap_or_else(|e| e.into_inner()) = probe;
    }
}

impl Adapter for NoopAdapter {
    fn spec(&self) -> KindSpec {
        KindSpec {
            name: KIND,
            at_most_once: false,
            instance_level: true,
            max_attempts_default: 3,
            backoff: Backoff::default(),
            call_timeout_ms: 10_000,
        }
    }

    // `Adapter` is an `#[async_trait]` trait; wharf-cli does not depend on async-trait, so
    // this is the signature the macro would write, by hand.
    fn execute<'s, 'a, 'async_trait>(
        &'s self,
        attempt: &'a mut Attempt,
    ) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'async_trait>>
    where
        's: 'async_trait,
        'a: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let probe = self.probe.read().unwrap_or_else(|e| e.into_inner()).clone();
            if let Some(probe) = probe {
                probe(attempt.payload());
            }
            let lane = attempt.lane_key().to_owned();
            self.lane_enter(&lane, attempt.action_id());
            let started = Instant::now();
            let outcome = match attempt.fence().begin_write().await {
                Ok(()) => {
                    metrics::histogram!(FENCE_SECONDS).record(started.elapsed().as_secs_f64());
                    Outcome::Done { readback_ref: None }
                }
                Err(e) => {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %e, "bench: the fence refused");
                    Outcome::Abandoned
                }
            };
            // Left before the result is recorded: the executor records it after `execute`
            // returns, and the lane's next claim waits for that record, so leaving here can
            // only make an overlap harder to miss, never report one that did not happen.
            self.lane_leave(&lane);
            outcome
        })
    }
}

/// A registry with the one `bench.noop` kind.
pub(crate) fn registry(adapter: Arc<NoopAdapter>, notify: bool) -> anyhow::Result<Arc<Registry>> {
    let mut registry = Registry::new();
    registry.register(adapter)?;
    registry.set_notify(notify);
    Ok(Arc::new(registry))
}

/// `wharf bench outbox` options.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct OutboxArgs {
    /// Actions per run (with --backlog: drained off the front of the backlog).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    n: u64,
    /// Attempts in flight in total (ExecutorConfig::concurrency_max, split over executors);
    /// also the pgbench ceiling's clients.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    workers: u32,
    /// Executors in this process, each with its own pool (replicas racing for the same heads).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    executors: u32,
    /// Lanes the actions are spread over, round-robin; 0 = one lane per action.
    #[arg(long, default_value_t = 0)]
    lanes: u64,
    /// Actions per enqueue_many call (one transaction each).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=ENQUEUE_BATCH_MAX as u64))]
    enqueue_batch: u64,
    /// Connections enqueuing at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    enqueue_connections: u32,
    /// ExecutorConfig::claim_batch_max (1..=100).
    #[arg(long, default_value_t = CLAIM_BATCH_LIMIT, value_parser = clap::value_parser!(u32).range(1..=i64::from(CLAIM_BATCH_LIMIT)))]
    claim_batch: u32,
    /// ExecutorConfig::claim_scan_max.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    claim_scan: u32,
    /// ExecutorConfig::claim_ahead_max: claimed actions held beyond the running ones, per
    /// executor (0: a slot waits for the next claim).
    #[arg(long, default_value_t = ExecutorConfig::default().claim_ahead_max, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    claim_ahead: u32,
    /// ExecutorConfig::completion_batch_max.
    #[arg(long, default_value_t = ExecutorConfig::default().completion_batch_max, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    completion_batch: u32,
    /// ExecutorConfig::claims_in_flight_max: claim statements in flight while claims come back
    /// full.
    #[arg(long, default_value_t = ExecutorConfig::default().claims_in_flight_max, value_parser = clap::value_parser!(u32).range(1..=4))]
    claims_in_flight: u32,
    /// ExecutorConfig::fence_with_claim: the claim's commit is the fence of kinds that are not
    /// at-most-once (off: every attempt fences on its own statement).
    #[arg(long, value_enum, default_value = "on")]
    fence_with_claim: OnOff,
    /// Wake-ups: enqueue's NOTIFY hint and the executor's LISTEN.
    #[arg(long, value_enum, default_value = "on")]
    notify: OnOff,
    /// ExecutorConfig::vacuum_live: the executor vacuums the live table when enough dead row
    /// versions gathered (off: only autovacuum, as before 2026-12-07).
    #[arg(long, value_enum, default_value = "on")]
    vacuum_live: OnOff,
    /// Backlog sizes to sweep, ascending (e.g. 10000,1000000): claim cost against backlog.
    /// 0 = no backlog (the plain enqueue-then-drain run).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    backlog: Vec<u64>,
    /// Lanes the backlog is spread over, round-robin (e.g. 100000); 0 = one lane per row.
    #[arg(long, default_value_t = 0)]
    backlog_lanes: u64,
    /// Make the backlog not due (run_at a year ahead) and drain N freshly enqueued actions
    /// past it, instead of draining N off the front of a due backlog.
    #[arg(long)]
    backlog_not_due: bool,
    /// Keep the backlog for the next invocation (a top-up counts what is there).
    #[arg(long)]
    keep_backlog: bool,
    /// Runs (A-B pairs of wharf and its ceiling); the medians are reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    runs: u32,
    /// pgbench seconds per ceiling measurement; 0 = no ceiling.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=3600))]
    ceiling_seconds: u32,
    /// Ceiling script(s): one action per step, --claim-batch per step, or both.
    #[arg(long, value_enum, default_value = "both")]
    ceiling_script: CeilingChoice,
    /// Limit for the whole invocation.
    #[arg(long, default_value_t = 1_800, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    timeout_seconds: u64,
    /// Work beside non-benchmark rows in the database (only bench.* rows are touched).
    #[arg(long)]
    shared_database: bool,
    /// One JSON line per run, then a summary line (last).
    #[arg(long)]
    json: bool,
}

/// What one drain measured.
struct Drained {
    seconds: f64,
    ended: u64,
    claim_ms: Vec<f64>,
    fence_ms: Vec<f64>,
    execution_ms: Vec<f64>,
    started_db: DateTime<Utc>,
    /// This process's resident set just before the executors started, MiB.
    rss_before_mib: Option<f64>,
}

/// The shared pieces of one invocation.
struct Bench {
    args: OutboxArgs,
    tag: String,
    pool: PgPool,
    url: String,
    pools: Vec<PgPool>,
    adapter: Arc<NoopAdapter>,
    registry: Arc<Registry>,
    seen: Arc<Seen>,
    deadline: Deadline,
}

/// `wharf bench outbox`.
pub(crate) async fn run(
    open: &impl AsyncFn(u32) -> anyhow::Result<Database>,
    args: OutboxArgs,
) -> anyhow::Result<()> {
    ensure!(
        args.backlog.windows(2).all(|w| w[0] < w[1]),
        "--backlog sizes must be ascending"
    );
    ensure!(
        args.claim_scan >= args.claim_batch,
        "--claim-scan must be at least --claim-batch"
    );
    ensure!(
        args.executors <= args.workers,
        "--executors must not exceed --workers"
    );
    let seen = recorder::seen().context("a metrics recorder was installed before wharf bench's")?;
    let deadline = Deadline::after(args.timeout_seconds);
    let db = super::open(open, args.enqueue_connections + 4, args.shared_database).await?;
    let mut machine = Machine::probe(&db.pool).await?;
    let per_executor = (args.workers / args.executors).max(1);
    let mut pools = Vec::new();
    for _ in 0..args.executors {
        pools.push(
            PgPoolOptions::new()
                // Claims, completions and one fence per attempt in flight, plus the listener
                // and the sweeps.
                .max_connections(per_executor + 4)
                .acquire_timeout(Duration::from_secs(30))
                .connect(&db.url)
                .await
                .context("cannot connect the executor's pool")?,
        );
    }
    let adapter = Arc::new(NoopAdapter::default());
    let registry = registry(adapter.clone(), args.notify.on())?;
    let bench = Bench {
        tag: super::run_tag(),
        pool: db.pool.clone(),
        url: db.url.clone(),
        pools,
        adapter,
        registry,
        seen,
        deadline,
        args,
    };
    let result = if bench.args.backlog == [0] {
        plain(&bench, &mut machine).await
    } else {
        backlog::sweep(&bench, &mut machine).await
    };
    for pool in &bench.pools {
        pool.close().await;
    }
    let closed = db.close().await;
    result?;
    closed
}

/// The plain run: enqueue N, drain N, ceiling; `--runs` times.
async fn plain(bench: &Bench, machine: &mut Machine) -> anyhow::Result<()> {
    let args = &bench.args;
    let scripts = scripts(args);
    let mut rows = Vec::new();
    for run in 1..=args.runs {
        clean(&bench.pool, args.shared_database, false).await?;
        let enqueued = enqueue_measured(bench, format!("{}:{run}", bench.tag), args.lanes).await?;
        analyze(&bench.pool).await?;
        super::checkpoint(&bench.pool).await;

        let drained = drain(bench, args.n).await?;
        let checked = check(&bench.pool, &bench.seen, drained.started_db, drained.ended).await?;
        ensure!(
            checked.ended == args.n,
            "run {run}: {} actions ended, {} were enqueued",
            checked.ended,
            args.n
        );
        let (rss, rss_peak) = report::rss_mib();
        let ceilings = ceilings(bench, &scripts, None).await?;
        let row = row_json(
            bench,
            run,
            0,
            Some(enqueued),
            &drained,
            &checked,
            &ceilings,
            (rss, rss_peak),
        );
        if args.json {
            report::json_line(&row)?;
        }
        rows.push(row);
    }
    machine.end();
    let summary = summary_json(bench, &rows, machine);
    if args.json {
        report::json_line(&summary)?;
    } else {
        print_plain(bench, &rows, &summary, machine);
    }
    Ok(())
}

fn scripts(args: &OutboxArgs) -> Vec<Script> {
    if args.ceiling_seconds == 0 {
        Vec::new()
    } else {
        args.ceiling_script.scripts()
    }
}

/// The pgbench ceilings of one run, at the same concurrency as the executor.
async fn ceilings(
    bench: &Bench,
    scripts: &[Script],
    backlog: Option<u64>,
) -> anyhow::Result<Vec<Measured>> {
    let args = &bench.args;
    let mut out = Vec::new();
    for &script in scripts {
        bench
            .deadline
            .check(|| format!("before the {} ceiling", script.name()))?;
        // run.sh's own sizing (drains far less than this in the time), raised to the backlog.
        let auto = match script {
            Script::ClaimFenceCompleteBatch => 50_000,
            _ => 20_000,
        } * u64::from(args.ceiling_seconds);
        let rows = backlog.map(|b| b.max(auto).max(100_000));
        let spinner = report::spinner(&format!("pgbench {}", script.name()));
        let measured = ceiling::measure(
            &bench.url,
            ceiling::Request {
                script,
                clients: args.workers,
                seconds: args.ceiling_seconds,
                batch: args.claim_batch,
                rows,
            },
        )
        .await;
        spinner.finish_and_clear();
        out.push(measured?);
    }
    Ok(out)
}

/// Deletes earlier runs' benchmark rows so every run starts alike, then vacuums. With
/// `keep_backlog` the unstarted backlog rows stay. Without `shared` (the database holds
/// nothing but benchmark rows, checked at open) a TRUNCATE does it at once.
pub(crate) async fn clean(pool: &PgPool, shared: bool, keep_backlog: bool) -> anyhow::Result<()> {
    if !shared && !keep_backlog {
        sqlx::query("TRUNCATE wharf.action_live, wharf.action_ended, wharf.action_key")
            .execute(pool)
            .await?;
    } else {
        // Ended rows (with their keys), then anything live that is not kept
        // backlog. Without `keep_backlog` the backlog goes too, as the sweep asks at its end;
        // a shared database used to keep it whatever was asked, leaving a due backlog of the
        // bench's own kind in front of the next command's actions.
        for statement in [
            "WITH gone AS (
                 DELETE FROM wharf.action_ended WHERE id IN (SELECT id FROM wharf.action_ended
                  WHERE kind LIKE 'bench.%' LIMIT $1)
                 RETURNING id, idempotency_key),
              keys AS (DELETE FROM wharf.action_key k USING gone g
                        WHERE k.idempotency_key = g.idempotency_key AND k.action_id = g.id)
              SELECT count(*) FROM gone",
            "WITH gone AS (
                 DELETE FROM wharf.action_live WHERE id IN (SELECT id FROM wharf.action_live
                  WHERE kind LIKE 'bench.%'
                    AND NOT ($2 AND idempotency_key LIKE 'bench:backlog:%' AND state = 'ADMITTED')
                  LIMIT $1)
                 RETURNING id, idempotency_key),
              keys AS (DELETE FROM wharf.action_key k USING gone g
                        WHERE k.idempotency_key = g.idempotency_key AND k.action_id = g.id)
              SELECT count(*) FROM gone",
        ] {
            // Bounded: a table of 100 M rows is 10 000 batches.
            for _ in 0..10_000 {
                let mut query = sqlx::query_scalar::<_, i64>(statement).bind(CLEAN_BATCH);
                if statement.contains("$2") {
                    query = query.bind(keep_backlog);
                }
                let deleted = query.fetch_one(pool).await?;
                if deleted < CLEAN_BATCH {
                    break;
                }
            }
        }
    }
    sqlx::query("VACUUM wharf.action_live, wharf.action_ended, wharf.action_key")
        .execute(pool)
        .await?;
    Ok(())
}

async fn analyze(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::query("ANALYZE wharf.action_live, wharf.action_ended, wharf.action_key")
        .execute(pool)
        .await?;
    Ok(())
}

/// What an enqueue phase did.
#[derive(Debug, Clone, Copy)]
struct Enqueued {
    seconds: f64,
    count: u64,
}

/// Enqueues the `--n` actions a drain measures, keyed by `tag`, over `lanes` lanes (0: a lane
/// each), behind a progress bar, with `--enqueue-batch` and `--enqueue-connections`.
async fn enqueue_measured(bench: &Bench, tag: String, lanes: u64) -> anyhow::Result<Enqueued> {
    let args = &bench.args;
    let make = move |i: u64| {
        let lane = if lanes == 0 { i } else { i % lanes };
        ActionRequest::new(
            KIND,
            format!("bench:{tag}:{lane}"),
            format!("bench:{tag}:{i}"),
            json!({ "i": i }),
        )
    };
    let bar = report::counter_bar(args.n, "enqueue");
    let enqueued = enqueue(
        &bench.pool,
        &bench.registry,
        args.n,
        args.enqueue_batch as usize,
        args.enqueue_connections as usize,
        Arc::new(make),
        &bar,
        &bench.deadline,
    )
    .await?;
    bar.finish_and_clear();
    Ok(enqueued)
}

/// Enqueues `n` requests built by `make(i)`, `batch` per `enqueue_many` call (each its own
/// committed transaction), on `connections` connections at once.
#[allow(clippy::too_many_arguments)]
async fn enqueue(
    pool: &PgPool,
    registry: &Arc<Registry>,
    n: u64,
    batch: usize,
    connections: usize,
    make: Arc<dyn Fn(u64) -> ActionRequest + Send + Sync>,
    bar: &indicatif::ProgressBar,
    deadline: &Deadline,
) -> anyhow::Result<Enqueued> {
    let next = Arc::new(AtomicU64::new(0));
    let batch = batch as u64;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..connections.max(1) {
        let (pool, registry, next, make, bar, deadline) = (
            pool.clone(),
            registry.clone(),
            next.clone(),
            make.clone(),
            bar.clone(),
            *deadline,
        );
        tasks.spawn(async move {
            let mut created = 0u64;
            loop {
                let from = next.fetch_add(batch, Ordering::Relaxed);
                if from >= n {
                    return anyhow::Ok(created);
                }
                deadline.check(|| format!("enqueuing ({from} of {n})"))?;
                let to = (from + batch).min(n);
                let reqs: Vec<ActionRequest> = (from..to).map(|i| make(i)).collect();
                let mut tx = pool.begin().await?;
                let out = enqueue_many(&mut tx, &registry, reqs).await?;
                tx.commit().await?;
                let fresh = out.iter().filter(|e| e.created).count() as u64;
                ensure!(
                    fresh == to - from,
                    "{} of {} benchmark actions already existed (idempotency keys reused?)",
                    (to - from) - fresh,
                    to - from
                );
                created += fresh;
                bar.inc(to - from);
            }
        });
    }
    let mut count = 0;
    while let Some(joined) = tasks.join_next().await {
        count += joined.context("an enqueue task panicked")??;
    }
    Ok(Enqueued {
        seconds: started.elapsed().as_secs_f64(),
        count,
    })
}

async fn drain(bench: &Bench, target: u64) -> anyhow::Result<Drained> {
    let args = &bench.args;
    let seen = &bench.seen;
    let ended_now = || seen.counter_sum(names::ENDED_TOTAL, &[("kind", KIND)]);
    for name in [
        names::CLAIM_SECONDS,
        names::EXECUTION_SECONDS,
        FENCE_SECONDS,
    ] {
        seen.take_samples(name);
    }
    let refused_before = bench.adapter.refused();
    let mut config = ExecutorConfig::default();
    config.claim_batch_max = args.claim_batch;
    config.claim_scan_max = args.claim_scan;
    config.concurrency_max = (args.workers / args.executors).max(1);
    config.per_kind_concurrency_max = config.concurrency_max;
    config.completion_batch_max = args.completion_batch;
    config.claim_ahead_max = args.claim_ahead;
    config.claims_in_flight_max = args.claims_in_flight;
    config.fence_with_claim = args.fence_with_claim.on();
    config.notify = args.notify.on();
    config.vacuum_live = args.vacuum_live.on();
    let executors = bench
        .pools
        .iter()
        .map(|pool| Executor::new(pool.clone(), bench.registry.clone(), config.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    let started_db: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&bench.pool)
        .await?;
    let base = ended_now();
    report::reset_peak_rss();
    let rss_before_mib = report::rss_mib().0;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let bar = report::counter_bar(target, "drain");
    let started = Instant::now();
    let mut running = tokio::task::JoinSet::new();
    for executor in executors {
        let mut stopped = stopped.clone();
        running.spawn(async move {
            executor
                .run(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await
        });
    }
    // Polled every millisecond: the end is seen within a millisecond of the last completion.
    let waited = loop {
        let ended = ended_now() - base;
        bar.set_position(ended.min(target));
        if ended >= target {
            break Ok(started.elapsed());
        }
        if bench.adapter.lane_violations() > 0 {
            break Err(anyhow::anyhow!(
                "{} lane violation(s): an attempt started while its lane ran another, or out of id order",
                bench.adapter.lane_violations()
            ));
        }
        if bench.adapter.refused() > refused_before {
            break Err(anyhow::anyhow!(
                "the fence refused {} attempt(s): the run did not do the work asked",
                bench.adapter.refused() - refused_before
            ));
        }
        if let Err(e) = bench
            .deadline
            .check(|| format!("draining ({ended} of {target} ended)"))
        {
            break Err(e);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    bar.finish_and_clear();
    let _ = stop.send(true);
    // The executor's own shutdown grace (30 s) bounds this; the margin catches a hang.
    let joined = tokio::time::timeout(Duration::from_secs(60), async {
        let mut result = Ok(());
        while let Some(joined) = running.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(anyhow::Error::from(e)),
                Err(e) => result = Err(anyhow::anyhow!("an executor panicked: {e}")),
            }
        }
        result
    })
    .await;
    let elapsed = waited?;
    joined.context("the executors did not stop within 60 s")??;
    let ms = |name: &str| -> Vec<f64> {
        seen.take_samples(name)
            .into_iter()
            .map(|s| s * 1_000.0)
            .collect()
    };
    Ok(Drained {
        seconds: elapsed.as_secs_f64(),
        ended: ended_now() - base,
        claim_ms: ms(names::CLAIM_SECONDS),
        fence_ms: ms(FENCE_SECONDS),
        execution_ms: ms(names::EXECUTION_SECONDS),
        started_db,
        rss_before_mib,
    })
}

/// What the database says about the actions a drain ended.
pub(crate) struct Checked {
    /// Actions ended since the drain started.
    pub(crate) ended: u64,
    /// Completion latency (write started → ended, database clock), median.
    pub(crate) completion_p50_ms: Option<f64>,
    /// The same, 99th percentile.
    pub(crate) completion_p99_ms: Option<f64>,
}

/// Every `bench.noop` action that ended `since` must be DONE on its first attempt, fenced,
/// without payload (its epoch may be above 1: an executor that stops gives back the actions it
/// held for a free slot without counting an attempt, and the next run claims them again); the database must show at least the `counted` ends the
/// executor reported; the executor must have counted only `done` results.
pub(crate) async fn check(
    pool: &PgPool,
    seen: &Seen,
    since: DateTime<Utc>,
    counted: u64,
) -> anyhow::Result<Checked> {
    let (ended, clean, p50, p99): (i64, i64, Option<f64>, Option<f64>) = sqlx::query_as(
        "SELECT count(*),
                count(*) FILTER (WHERE state = 'DONE' AND attempt = 1
                                   AND payload IS NULL AND write_started_at IS NOT NULL),
                percentile_cont(0.5) WITHIN GROUP
                    (ORDER BY extract(epoch FROM ended_at - write_started_at)) * 1000,
                percentile_cont(0.99) WITHIN GROUP
                    (ORDER BY extract(epoch FROM ended_at - write_started_at)) * 1000
           FROM wharf.action
          WHERE kind = $1 AND ended_at >= $2",
    )
    .bind(KIND)
    .bind(since)
    .fetch_one(pool)
    .await?;
    ensure!(
        ended == clean,
        "{} of {ended} ended actions were not DONE on their first attempt: the run did not do \
         the work asked",
        ended - clean
    );
    ensure!(
        ended as u64 >= counted,
        "the executor counted {counted} ended actions, the database shows {ended}"
    );
    let all = seen.counter_sum(names::ATTEMPTS_TOTAL, &[("kind", KIND)]);
    let done = seen.counter_sum(names::ATTEMPTS_TOTAL, &[("kind", KIND), ("result", "done")]);
    ensure!(
        all == done,
        "attempts other than done were counted: {:?}",
        seen.counters_named(names::ATTEMPTS_TOTAL)
    );
    Ok(Checked {
        ended: ended as u64,
        completion_p50_ms: p50,
        completion_p99_ms: p99,
    })
}
