//! `wharf retention run`: deletes expired inbox payloads in batches of at most 1,000 (identities,
//! cursors, floors and audit stay, so an expired event can never be accepted again), and ended
//! actions older than their retention (30 days by default), also in bounded batches. Executors
//! run the action retention on their own; this command is for deployments that run none, and
//! for operators who want it now.

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
        /// Keep ended actions this many days.
        #[arg(long, default_value_t = 30)]
        action_days: u64,
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
        action_days,
        batches_max,
        json,
    } = args.command;
    let db = Database::open(config, Open::ADMIN).await?;
    let spinner = super::progress::spinner("deleting expired inbox payloads");
    let retention = Duration::from_secs(days.saturating_mul(24 * 3600));
    let deleted = wharf::inbox::run_retention(&db.pool, retention, batch_max, batches_max).await;
    let actions = match &deleted {
        Ok(payloads) => {
            spinner.set_message(format!(
                "deleted {payloads} inbox payload(s); deleting ended actions older than {action_days} days"
            ));
            delete_ended_actions(&db, action_days, batch_max, batches_max, &spinner).await
        }
        Err(_) => Ok(0),
    };
    spinner.finish_and_clear();
    db.close().await?;
    let deleted = deleted?;
    let actions = actions?;
    if json {
        println!(
            "{}",
            serde_json::json!({"deleted_payloads": deleted, "retention_days": days,
                               "deleted_actions": actions, "action_retention_days": action_days})
        );
    } else {
        println!("deleted {deleted} inbox payload(s) older than {days} days");
        println!("deleted {actions} ended action(s) older than {action_days} days");
    }
    Ok(())
}

async fn delete_ended_actions(
    db: &Database,
    days: u64,
    batch_max: usize,
    batches_max: usize,
    progress: &indicatif::ProgressBar,
) -> anyhow::Result<u64> {
    let days = i64::try_from(days).unwrap_or(i64::MAX);
    let cutoff =
        chrono::Utc::now() - chrono::TimeDelta::try_days(days).unwrap_or(chrono::TimeDelta::MAX);
    let batch = u32::try_from(batch_max.clamp(1, wharf::inbox::RETENTION_BATCH_MAX)).unwrap_or(1);
    let mut deleted = 0;
    for _ in 0..batches_max {
        let n = wharf::outbox::delete_ended_before(&db.pool, cutoff, batch).await?;
        deleted += n;
        progress.set_message(format!("deleting ended actions: {deleted} deleted so far"));
        if n < u64::from(batch) {
            break;
        }
    }
    Ok(deleted)
}
