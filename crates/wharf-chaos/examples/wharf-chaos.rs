//! `wharf-chaos`: one fault-injection run against the built `wharf` binary; prints the summary
//! (Markdown) and exits non-zero when the checker found a violation.
//!
//! ```text
//! cargo build --release -p wharf-cli -p wharf-chaos
//! target/release/wharf-chaos --big --keep /tmp/chaos-big
//! ```

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use wharf_chaos::run::{FaultKind, Settings};

/// One chaos run.
#[derive(Debug, Parser)]
#[command(name = "wharf-chaos", version)]
struct Args {
    /// The RELIABILITY.md run (100,000 actions, ≥ 100 faults of each kind) instead of the
    /// small one.
    #[arg(long)]
    big: bool,
    /// Actions to enqueue (overrides the preset).
    #[arg(long)]
    actions: Option<u64>,
    /// Faults of each kind, at least (overrides the preset).
    #[arg(long)]
    faults_per_kind: Option<u32>,
    /// Mean milliseconds between two faults of one kind (overrides the preset).
    #[arg(long)]
    fault_interval_ms: Option<u64>,
    /// Envelopes per producer (overrides the preset).
    #[arg(long)]
    envelopes_per_producer: Option<u64>,
    /// Only these fault kinds (comma-separated: kill, pause, terminate, restart, after_claim,
    /// after_fence, after_answer, cut, sigterm).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Provider faults per thousand calls: refuse,tempfail,timeout.
    #[arg(long, value_delimiter = ',')]
    provider_permille: Vec<u64>,
    /// Milliseconds PostgreSQL stays down in a restart: min,max.
    #[arg(long, value_delimiter = ',')]
    restart_down_ms: Vec<u64>,
    /// Actions in flight the feeder keeps at most (overrides the preset).
    #[arg(long)]
    backlog_max: Option<u64>,
    /// `[executor] poll_interval_ms_max` of every replica (overrides the preset's 500).
    #[arg(long)]
    poll_interval_ms_max: Option<u64>,
    /// Lanes the actions are spread over (overrides the preset). More lanes than a claim takes
    /// keep claims full, which a second claim in flight waits for.
    #[arg(long)]
    lanes: Option<u32>,
    /// `[executor] claims_in_flight_max` of every replica, 1..=4 (overrides the preset's 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4))]
    claims_in_flight_max: Option<u32>,
    /// The executor's lease in milliseconds (overrides the preset's 8000; at least 7000).
    #[arg(long)]
    lease_ms: Option<u64>,
    /// The wharf binary [default: WHARF_BIN, else `wharf` beside this executable].
    #[arg(long)]
    wharf: Option<PathBuf>,
    /// Keep the run's directory (process logs, outcome.json) here.
    #[arg(long)]
    keep: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut settings = if args.big {
        Settings::big()
    } else {
        Settings::small()
    };
    if let Some(v) = args.actions {
        settings.actions = v;
    }
    if let Some(v) = args.faults_per_kind {
        settings.faults_per_kind = v;
    }
    if let Some(v) = args.fault_interval_ms {
        settings.fault_interval_ms = v;
    }
    if let Some(v) = args.envelopes_per_producer {
        settings.envelopes_per_producer = v;
    }
    if let Some(v) = args.backlog_max {
        settings.backlog_max = v;
    }
    if let Some(v) = args.poll_interval_ms_max {
        settings.poll_interval_ms_max = v;
    }
    if let Some(v) = args.lanes {
        anyhow::ensure!(v >= 1, "--lanes must be at least 1");
        settings.lanes = v;
    }
    if let Some(v) = args.claims_in_flight_max {
        settings.claims_in_flight_max = v;
    }
    if let Some(v) = args.lease_ms {
        anyhow::ensure!(
            v >= 7_000,
            "--lease-ms must be at least 7000 (the fence margin is 6 s)"
        );
        settings.lease_ms = v;
    }
    if !args.only.is_empty() {
        settings.kinds = args
            .only
            .iter()
            .map(|k| match k.as_str() {
                "kill" => Ok(FaultKind::Kill),
                "pause" => Ok(FaultKind::Pause),
                "terminate" => Ok(FaultKind::TerminateBackends),
                "restart" => Ok(FaultKind::PostgresRestart),
                "after_claim" => Ok(FaultKind::AfterClaim),
                "after_fence" => Ok(FaultKind::AfterFence),
                "after_answer" => Ok(FaultKind::AfterAnswer),
                "cut" => Ok(FaultKind::NetworkCut),
                "sigterm" => Ok(FaultKind::Sigterm),
                other => Err(anyhow::anyhow!("unknown fault kind {other:?}")),
            })
            .collect::<Result<_, _>>()?;
    }
    if !args.provider_permille.is_empty() {
        settings.provider_permille = args
            .provider_permille
            .as_slice()
            .try_into()
            .context("--provider-permille takes three numbers: refuse,tempfail,timeout")?;
    }
    if !args.restart_down_ms.is_empty() {
        settings.restart_down_ms = args
            .restart_down_ms
            .as_slice()
            .try_into()
            .context("--restart-down-ms takes two numbers: min,max")?;
    }
    let wharf = match args.wharf {
        Some(path) => path,
        None => wharf_chaos::procs::locate_wharf()?,
    };
    eprintln!("wharf-chaos: {settings:?}");
    let outcome = wharf_chaos::run::run(settings, wharf, args.keep).await?;
    let summary = wharf_chaos::report::summarize(&outcome);
    println!("{}", wharf_chaos::report::markdown(&summary));
    if let Some(dir) = &outcome.dir {
        std::fs::write(
            dir.join("summary.json"),
            serde_json::to_vec_pretty(&summary)?,
        )?;
    }
    if !outcome.violations.is_empty() {
        for v in outcome.violations.iter().take(50) {
            eprintln!("violation: {v:?}");
        }
        anyhow::bail!("{} violation(s)", outcome.violations.len());
    }
    Ok(())
}
