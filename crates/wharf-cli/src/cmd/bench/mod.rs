//! `wharf bench outbox | latency | inbox | ceiling`: wharf's figures beside baselines measured
//! in the same run (bench/DESIGN.md, SPEC §5).
//!
//! Every figure here is reported next to a baseline from the same invocation, on the same
//! server, as a ratio, and over several runs as a median — this machine is shared and noisy,
//! so an absolute figure alone says little. A run that did not do exactly the work asked (an
//! action not DONE, an attempt beyond the first, an envelope not accepted, a pgbench client
//! aborted) fails the whole invocation: no figure is better than a wrong one.
//!
//! Owns: the command line, the bench database (`wharf_bench` on the embedded cluster, or the
//! URL as given, refused when it holds anything but benchmark rows), clean starts, deadlines.
//! Must not know: any rule of the outbox or the inbox — it drives the public library API only.
//!
//! Modules: [`outbox`] (drain and backlog sweep), [`latency`] (enqueue→start at an offered
//! load), [`inbox`] (verified envelopes/s, over [`http`]), [`ceiling`] (pgbench), and the shared
//! [`recorder`] (the library's own metrics), [`stats`] (pure arithmetic), [`report`].

pub mod ceiling;
pub mod http;
pub mod inbox;
mod jetstream;
pub mod latency;
pub mod outbox;
pub mod recorder;
pub mod report;
pub mod stats;

use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::config::Config;
use crate::db::{Database, Open};

/// The database the benchmarks use on the embedded cluster: never `wharf`, so no benchmark
/// row lands where `wharf serve` keeps real actions.
pub const BENCH_DATABASE: &str = "wharf_bench";
/// The tenant every benchmark envelope belongs to.
pub const TENANT: &str = "wharf-bench";

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

/// `wharf bench`.
pub async fn run(config: &Config, args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Outbox(args) => outbox::run(config, args).await,
        BenchCommand::Latency(args) => latency::run(config, args).await,
        BenchCommand::Inbox(args) => inbox::run(config, args).await,
        BenchCommand::Ceiling(args) => ceiling::run(config, args).await,
    }
}

/// Opens (and migrates) the bench database with `connections_max` connections. Unless
/// `shared_database`, refuses a database that holds actions of other kinds or inbox tenants
/// other than [`TENANT`]: a benchmark deletes its leftovers, and must never delete anyone
/// else's.
pub async fn open(
    config: &Config,
    connections_max: u32,
    shared_database: bool,
) -> anyhow::Result<Database> {
    let db = Database::open_named(
        config,
        Open {
            migrate: true,
            connections_max,
            wait: crate::db::Wait::ONCE,
        },
        BENCH_DATABASE,
        &|_| {},
    )
    .await?;
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
pub struct Deadline {
    at: Instant,
    seconds: u64,
}

impl Deadline {
    /// `seconds` from now.
    pub fn after(seconds: u64) -> Deadline {
        Deadline {
            at: Instant::now() + Duration::from_secs(seconds),
            seconds,
        }
    }

    /// An error naming what was being waited for, once the deadline has passed.
    pub fn check(&self, what: impl FnOnce() -> String) -> anyhow::Result<()> {
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
pub fn run_tag() -> String {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!("{micros:x}{:x}", std::process::id())
}

/// `CHECKPOINT` before a measured phase, so it does not flush the previous phase's writes.
/// Needs a superuser or `pg_checkpoint`; skipped otherwise.
pub async fn checkpoint(pool: &sqlx::PgPool) {
    if let Err(e) = sqlx::query("CHECKPOINT").execute(pool).await {
        tracing::debug!(error = %e, "CHECKPOINT not allowed; skipped");
    }
}

/// Whether a flag said `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

impl OnOff {
    /// As a boolean.
    pub fn on(self) -> bool {
        self == OnOff::On
    }
}
