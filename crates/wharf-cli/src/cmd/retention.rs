//! `wharf retention run`: deletes expired inbox payloads in batches of at most 1,000. Identities,
//! cursors, floors and audit stay, so an expired event can never be accepted again.

use std::time::Duration;

use crate::config::Config;
use crate::db::{Database, Open};

/// `wharf retention` options.
#[derive(Debug, clap::Args)]
pub struct RetentionArgs {
    #[command(subcommand)]
    command: RetentionCommand,
}

#[derive(Debug, clap::Subcommand)]
enum RetentionCommand {
    /// Delete payloads older than the retention, batch by batch.
    Run {
        /// Keep payloads this many days.
        #[arg(long, default_value_t = 90)]
        days: u64,
        /// Payloads per delete statement (1..=1000).
        #[arg(long, default_value_t = wharf::inbox::RETENTION_BATCH_MAX)]
        batch_max: usize,
        /// Stop after this many batches (the next run continues).
        #[arg(long, default_value_t = 10_000)]
        batches_max: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `wharf retention`.
pub async fn run(config: &Config, args: RetentionArgs) -> anyhow::Result<()> {
    let RetentionCommand::Run {
        days,
        batch_max,
        batches_max,
        json,
    } = args.command;
    let db = Database::open(config, Open::ADMIN).await?;
    let spinner = super::progress::spinner("deleting expired inbox payloads");
    let retention = Duration::from_secs(days.saturating_mul(24 * 3600));
    let deleted = wharf::inbox::run_retention(&db.pool, retention, batch_max, batches_max).await;
    spinner.finish_and_clear();
    db.close().await?;
    let deleted = deleted?;
    if json {
        println!(
            "{}",
            serde_json::json!({"deleted_payloads": deleted, "retention_days": days})
        );
    } else {
        println!("deleted {deleted} inbox payload(s) older than {days} days");
    }
    Ok(())
}
