//! wharf's benchmarks: `wharf bench outbox | latency | inbox | ceiling`, wharf's figures beside
//! baselines measured in the same run (bench/DESIGN.md, SPEC §5).
//!
//! A library the `wharf` binary calls: the CLI parses [`BenchArgs`] as its `bench` subcommand,
//! opens the bench database the way every command opens its own (the embedded cluster or
//! `DATABASE_URL`), and hands both to [`run`]. Everything else, and every line the commands
//! print, is this crate's.
//!
//! Every figure here is reported next to a baseline from the same invocation, on the same
//! server, as a ratio, and over several runs as a median — this machine is shared and noisy,
//! so an absolute figure alone says little. A run that did not do exactly the work asked (an
//! action not DONE, an attempt beyond the first, an envelope not accepted, a pgbench client
//! aborted) fails the whole invocation: no figure is better than a wrong one.
//!
//! Owns: the benchmarks' command lines, the check that the bench database holds nothing but
//! benchmark rows (refused otherwise), clean starts, deadlines. Must not know: any rule of the
//! outbox or the inbox — it drives the public library API only; nor how a database is found or
//! an embedded cluster started (the caller's [`Database`] brings its own way to close).
//!
//! Modules: `outbox` (drain and backlog sweep), `latency` (enqueue→start at an offered load),
//! `inbox` (verified envelopes/s, over `http` or `jetstream`), `ceiling` (pgbench), and the
//! shared `recorder` (the library's own metrics), `stats` (pure arithmetic), `report`.

mod ceiling;
mod http;
mod inbox;
mod jetstream;
mod latency;
mod outbox;
mod recorder;
mod report;
mod stats;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sqlx::PgPool;

/// The database the benchmarks use on the embedded cluster: never `wharf`, so no benchmark
/// row lands where `wharf serve` keeps real actions.
pub const BENCH_DATABASE: &str = "wharf_bench";

pub use report::build_commit;
/// The tenant every benchmark envelope belongs to.
pub(crate) const TENANT: &str = "wharf-bench";

/// `wharf bench` options.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, clap::Subcommand)]
enum BenchCommand {
    /// Enqueue N no-op actions, drain them with the real executor (full fencing), and compare
    /// with the pgbench ceiling of the same SQL path; `--backlog` sweeps claim cost.
    Outbox(outbox::OutboxArgs),
    /// Enqueue→start latency at a fixed offered load, wake-ups on (and off).
    Latency(latency::LatencyArgs),
    /// Verified envelopes per second through the inbox, single and batch endpoints.
    Inbox(inbox::InboxArgs),
    /// The PostgreSQL ceiling: pgbench with bench/pgbench's scripts on the bench database.
    Ceiling(ceiling::CeilingArgs),
}

/// The bench database as the caller opened it: migrated, with the pool a benchmark asked for,
/// and whatever must happen when the benchmark is done with it (closing the pool, stopping an
/// embedded cluster it started).
pub struct Database {
    /// The pool every library call takes.
    pub(crate) pool: PgPool,
    /// The URL, for the extra pools a benchmark opens and for pgbench.
    pub(crate) url: String,
    closing: Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>,
}

impl Database {
    /// A database reached at `url` through `pool`; `closing` runs (once) when the benchmark is
    /// done with it, and should close `pool`.
    pub fn new(
        pool: PgPool,
        url: String,
        closing: impl Future<Output = anyhow::Result<()>> + Send + 'static,
    ) -> Database {
        Database {
            pool,
            url,
            closing: Box::pin(closing),
        }
    }

    /// Closes the database the way its opener said.
    pub(crate) async fn close(self) -> anyhow::Result<()> {
        self.closing.await
    }
}

/// `wharf bench`. `open(connections_max)` opens (and migrates) the bench database with that
/// many connections; a benchmark calls it once, after its arguments passed their checks.
pub async fn run(
    open: impl AsyncFn(u32) -> anyhow::Result<Database>,
    args: BenchArgs,
) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Outbox(args) => outbox::run(&open, args).await,
        BenchCommand::Latency(args) => latency::run(&open, args).await,
        BenchCommand::Inbox(args) => inbox::run(&open, args).await,
        BenchCommand::Ceiling(args) => ceiling::run(&open, args).await,
    }
}

/// Opens the bench database through the caller's `opener` with `connections_max` connections.
/// Unless `shared_database`, refuses a database that holds actions of other kinds or inbox
/// tenants other than [`TENANT`]: a benchmark deletes its leftovers, and must never delete
/// anyone else's.
pub(crate) async fn open(
    opener: &impl AsyncFn(u32) -> anyhow::Result<Database>,
    connections_max: u32,
    shared_database: bool,
) -> anyhow::Result<Database> {
    let db = opener(connections_max).await?;
    if !shared_database {
        let (foreign_kinds, foreign_tenants): (bool, bool) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM wharf.action WHERE kind NOT LIKE 'bench.%'),
                    EXISTS (SELECT 1 FROM wharf.inbox_tenants WHERE tenant_id <> $1)",
        )
        .bind(TENANT)
        .fetch_one(&db.pool)
        .await
        .context("cannot inspect the bench database")?;
        if foreign_kinds || foreign_tenants {
            db.close().await?;
            bail!(
                "the database holds actions or tenants that are not wharf bench's; use the \
                 embedded cluster (no DATABASE_URL) or a database of its own, or pass \
                 --shared-database to work beside them"
            );
        }
    }
    Ok(db)
}

/// A deadline for a whole invocation: every wait loop asks it, so every run ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    at: Instant,
    seconds: u64,
}

impl Deadline {
    /// `seconds` from now.
    pub(crate) fn after(seconds: u64) -> Deadline {
        Deadline {
            at: Instant::now() + Duration::from_secs(seconds),
            seconds,
        }
    }

    /// An error naming what was being waited for, once the deadline has passed.
    pub(crate) fn check(&self, what: impl FnOnce() -> String) -> anyhow::Result<()> {
        if Instant::now() >= self.at {
            bail!(
                "--timeout-seconds {} ran out while {}",
                self.seconds,
                what()
            );
        }
        Ok(())
    }
}

/// A tag unique to this invocation (hex of the start time in µs and the pid), so idempotency
/// keys, lanes and streams of different runs never meet.
pub(crate) fn run_tag() -> String {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!("{micros:x}{:x}", std::process::id())
}

/// `CHECKPOINT` before a measured phase, so it does not flush the previous phase's writes.
/// Needs a superuser or `pg_checkpoint`; skipped otherwise.
pub(crate) async fn checkpoint(pool: &sqlx::PgPool) {
    if let Err(e) = sqlx::query("CHECKPOINT").execute(pool).await {
        tracing::debug!(error = %e, "CHECKPOINT not allowed; skipped");
    }
}

/// Whether a flag said `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

impl OnOff {
    /// As a boolean.
    pub(crate) fn on(self) -> bool {
        self == OnOff::On
    }
}
