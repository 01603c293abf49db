//! `wharf bench ceiling`: the machine's PostgreSQL ceiling, measured with pgbench and the
//! scripts in `bench/pgbench` (bench/README.md), on the bench database.
//!
//! Owns: running `bench/pgbench/run.sh` and reading its JSON lines. The same [`measure`] is
//! what `bench outbox` calls for its baseline, so a figure and its ceiling always come from the
//! same scripts, the same server and the same invocation.
//!
//! The scripts are embedded with `include_str!` from outside the crate: one source of truth
//! for the SQL and its driver, and fine for a binary that is not published to crates.io.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;

use super::report::{self, Machine};
use super::stats::{Spread, median};
use crate::Database;

const RUN_SH: &str = include_str!("../../../bench/pgbench/run.sh");
const SCRIPTS: [(&str, &str); 4] = [
    (
        "setup.sql",
        include_str!("../../../bench/pgbench/setup.sql"),
    ),
    (
        "insert.sql",
        include_str!("../../../bench/pgbench/insert.sql"),
    ),
    (
        "claim_fence_complete.sql",
        include_str!("../../../bench/pgbench/claim_fence_complete.sql"),
    ),
    (
        "claim_fence_complete_batch.sql",
        include_str!("../../../bench/pgbench/claim_fence_complete_batch.sql"),
    ),
];

/// A pgbench script of `bench/pgbench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Script {
    /// One single-row INSERT per transaction: the commit rate under an unbatched enqueue.
    Insert,
    /// Claim, fence and complete one action, three transactions: an unbatched executor's floor.
    ClaimFenceComplete,
    /// The same with `--batch` actions per statement: a batched executor's floor.
    ClaimFenceCompleteBatch,
}

impl Script {
    /// The name run.sh knows it by.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Script::Insert => "insert",
            Script::ClaimFenceComplete => "claim_fence_complete",
            Script::ClaimFenceCompleteBatch => "claim_fence_complete_batch",
        }
    }
}

/// What `bench outbox` compares against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CeilingChoice {
    /// `claim_fence_complete` (one action per step).
    Single,
    /// `claim_fence_complete_batch` (`--claim-batch` actions per step).
    Batch,
    /// Both, one after the other.
    Both,
}

impl CeilingChoice {
    /// The scripts to run.
    pub(crate) fn scripts(self) -> Vec<Script> {
        match self {
            CeilingChoice::Single => vec![Script::ClaimFenceComplete],
            CeilingChoice::Batch => vec![Script::ClaimFenceCompleteBatch],
            CeilingChoice::Both => {
                vec![Script::ClaimFenceComplete, Script::ClaimFenceCompleteBatch]
            }
        }
    }
}

/// One pgbench measurement, as run.sh prints it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub(crate) struct Measured {
    /// The script.
    pub(crate) script: String,
    /// pgbench clients.
    pub(crate) clients: u32,
    /// Seconds measured.
    pub(crate) seconds: u32,
    /// Rows prefilled (the backlog the claim ran against).
    pub(crate) rows: u64,
    /// pgbench transactions per second.
    pub(crate) tps: f64,
    /// Actions per second (claim scripts only).
    pub(crate) jobs_per_second: Option<f64>,
    /// Actions per step (batch script only).
    pub(crate) batch: Option<u32>,
    /// pgbench's average latency per transaction, ms.
    pub(crate) latency_ms_avg: f64,
}

impl Measured {
    /// The figure a wharf figure is divided by: actions/s for the claim scripts, commits/s for
    /// the insert script.
    pub(crate) fn rate(&self) -> f64 {
        self.jobs_per_second.unwrap_or(self.tps)
    }
}

/// How to run one measurement.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    /// Which script.
    pub(crate) script: Script,
    /// pgbench clients (compare at the same concurrency as the system measured).
    pub(crate) clients: u32,
    /// pgbench -T.
    pub(crate) seconds: u32,
    /// Actions per step of the batch script (1..=100).
    pub(crate) batch: u32,
    /// Rows to prefill; `None` lets run.sh size it above what the run can drain.
    pub(crate) rows: Option<u64>,
}

/// Runs `bench/pgbench/run.sh` for one script against `url` and returns its measurement.
/// Bounded: run.sh limits pgbench to `seconds` + 60 s; this adds the prefill's time and a
/// margin on top.
pub(crate) async fn measure(url: &str, request: Request) -> anyhow::Result<Measured> {
    let dir = ScriptDir::create()?;
    let binaries = wharf_pg::Binaries::locate().context("cannot find pgbench and psql")?;
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg(dir.path().join("run.sh"))
        .args(["--script", request.script.name()])
        .args(["--seconds", &request.seconds.to_string()])
        .args(["--clients", &request.clients.to_string()])
        .args(["--batch", &request.batch.to_string()])
        .env("DATABASE_URL", url)
        .env("PGBENCH", binaries.bin_dir.join("pgbench"))
        .env("PSQL", binaries.bin_dir.join("psql"))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    if let Some(rows) = request.rows {
        cmd.args(["--rows", &rows.to_string()]);
    }
    // The prefill of a 10 M backlog takes minutes on this machine; pgbench itself is bounded.
    let limit = Duration::from_secs(u64::from(request.seconds) + 1_800);
    let output = tokio::time::timeout(limit, cmd.output())
        .await
        .with_context(|| {
            format!(
                "pgbench ({}) did not finish in {limit:?}",
                request.script.name()
            )
        })?
        .context("cannot run bench/pgbench/run.sh")?;
    if !output.status.success() {
        bail!(
            "bench/pgbench/run.sh --script {} failed ({}): {}",
            request.script.name(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .context("run.sh printed no JSON line")?;
    serde_json::from_str(line).with_context(|| format!("cannot read run.sh's line {line}"))
}

/// A private temporary directory holding run.sh and its scripts, removed when dropped.
struct ScriptDir(PathBuf);

impl ScriptDir {
    fn create() -> anyhow::Result<ScriptDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "wharf-bench-pgbench-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let made = ScriptDir(dir);
        std::fs::write(made.0.join("run.sh"), RUN_SH)?;
        for (name, text) in SCRIPTS {
            std::fs::write(made.0.join(name), text)?;
        }
        Ok(made)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScriptDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `wharf bench ceiling` options.
#[derive(Debug, clap::Args)]
pub(crate) struct CeilingArgs {
    /// Scripts to run; repeat or separate with commas [default: all three].
    #[arg(long, value_delimiter = ',')]
    script: Vec<Script>,
    /// pgbench clients; several (e.g. 10,32) give one row each.
    #[arg(long, value_delimiter = ',', default_value = "10")]
    clients: Vec<u32>,
    /// Seconds per measurement (1..=3600).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=3600))]
    seconds: u32,
    /// Actions per step of the batch script (1..=100).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100))]
    batch: u32,
    /// Due rows to prefill (the backlog the claim runs against) [default: run.sh sizes it].
    #[arg(long)]
    rows: Option<u64>,
    /// Measurements per script × clients; the median is reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    runs: u32,
    /// One JSON line per measurement, then a summary line.
    #[arg(long)]
    json: bool,
}

/// `wharf bench ceiling`.
pub(crate) async fn run(
    open: &impl AsyncFn(u32) -> anyhow::Result<Database>,
    args: CeilingArgs,
) -> anyhow::Result<()> {
    let scripts = if args.script.is_empty() {
        vec![
            Script::Insert,
            Script::ClaimFenceComplete,
            Script::ClaimFenceCompleteBatch,
        ]
    } else {
        args.script.clone()
    };
    if args.clients.iter().any(|&c| c == 0 || c > 1000) {
        bail!("--clients must be 1..=1000");
    }
    let db = super::open(open, 2, false).await?;
    let mut machine = Machine::probe(&db.pool).await?;
    let mut rows_out = Vec::new();
    let mut summary = Vec::new();
    let total = scripts.len() * args.clients.len() * args.runs as usize;
    let bar = report::counter_bar(total as u64, "pgbench");
    for &script in &scripts {
        for &clients in &args.clients {
            let mut rates = Vec::new();
            let mut latencies = Vec::new();
            for run in 1..=args.runs {
                let m = measure(
                    &db.url,
                    Request {
                        script,
                        clients,
                        seconds: args.seconds,
                        batch: args.batch,
                        rows: args.rows,
                    },
                )
                .await?;
                bar.inc(1);
                if args.json {
                    report::json_line(&serde_json::json!({
                        "system": "pgbench", "command": "ceiling", "run": run, "measured": m,
                    }))?;
                }
                rates.push(m.rate());
                latencies.push(m.latency_ms_avg);
                rows_out.push(m);
            }
            summary.push(serde_json::json!({
                "script": script.name(), "clients": clients,
                "per_second": Spread::of(&rates),
                "latency_ms_avg": median(&latencies),
            }));
        }
    }
    bar.finish_and_clear();
    machine.end();
    if args.json {
        report::json_line(&serde_json::json!({
            "system": "pgbench", "command": "ceiling", "summary": true, "runs": args.runs,
            "seconds": args.seconds, "batch": args.batch, "results": summary, "machine": machine,
        }))?;
    } else {
        println!(
            "wharf bench ceiling  seconds={} batch={} runs={}",
            args.seconds, args.batch, args.runs
        );
        println!("{}", machine.line());
        let rows: Vec<Vec<String>> = rows_out
            .iter()
            .map(|m| {
                vec![
                    m.script.clone(),
                    m.clients.to_string(),
                    m.rows.to_string(),
                    format!("{:.1}", m.tps),
                    report::cell(m.jobs_per_second, 1),
                    format!("{:.3}", m.latency_ms_avg),
                ]
            })
            .collect();
        report::table(
            &["script", "clients", "rows", "tps", "jobs/s", "latency ms"],
            &rows,
        );
    }
    db.close().await
}
