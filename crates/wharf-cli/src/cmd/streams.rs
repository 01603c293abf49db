//! `wharf streams show|advance-floor|skip`: a project's producer streams, and the two audited
//! operator actions that move one by hand.

use anyhow::bail;
use wharf::inbox::streams::{self, Producer, StreamId};

use crate::config::Config;
use crate::db::{Database, Open};

/// `wharf streams` options.
#[derive(Debug, clap::Args)]
pub struct StreamsArgs {
    #[command(subcommand)]
    command: StreamsCommand,
}

#[derive(Debug, clap::Args)]
struct Target {
    /// The tenant.
    #[arg(long)]
    tenant: String,
    /// The project.
    #[arg(long)]
    project: String,
    /// The producing device.
    #[arg(long, conflicts_with = "account")]
    device: Option<String>,
    /// The producing account (for credentials without a device).
    #[arg(long)]
    account: Option<String>,
}

impl Target {
    fn producer(&self) -> Option<Producer> {
        match (&self.device, &self.account) {
            (Some(device), _) => Some(Producer::Device(device.clone())),
            (None, Some(account)) => Some(Producer::Account(account.clone())),
            (None, None) => None,
        }
    }

    fn stream(&self) -> anyhow::Result<StreamId> {
        let Some(producer) = self.producer() else {
            bail!("name the stream's producer with --device or --account");
        };
        Ok(StreamId {
            tenant: self.tenant.clone(),
            project: self.project.clone(),
            producer,
        })
    }
}

#[derive(Debug, clap::Subcommand)]
enum StreamsCommand {
    /// Show a project's streams (one producer's with --device/--account).
    Show {
        #[command(flatten)]
        target: Target,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Raise a stream's replay floor: new envelopes below it are refused as replays. Audited.
    AdvanceFloor {
        #[command(flatten)]
        target: Target,
        /// The new floor (at most the cursor + 1).
        #[arg(long)]
        floor: u64,
        /// Who does it (recorded in the audit).
        #[arg(long)]
        operator: String,
        /// Why (recorded in the audit).
        #[arg(long)]
        reason: String,
    },
    /// Move a stream's cursor past a gap that will never fill. Audited.
    Skip {
        #[command(flatten)]
        target: Target,
        /// The sequence the cursor moves to (ahead of it).
        #[arg(long)]
        to: u64,
        /// Who does it (recorded in the audit).
        #[arg(long)]
        operator: String,
        /// Why (recorded in the audit).
        #[arg(long)]
        reason: String,
    },
}

/// `wharf streams`.
pub async fn run(config: &Config, args: StreamsArgs) -> anyhow::Result<()> {
    let db = Database::open(config, Open::ADMIN).await?;
    let result = command(&db.pool, args.command).await;
    db.close().await?;
    result
}

async fn command(pool: &sqlx::PgPool, command: StreamsCommand) -> anyhow::Result<()> {
    match command {
        StreamsCommand::Show { target, json } => {
            let mut conn = pool.acquire().await?;
            let producer = target.producer();
            let rows = streams::show(
                &mut conn,
                &target.tenant,
                &target.project,
                producer.as_ref(),
            )
            .await?;
            if json {
                let rows: Vec<_> = rows
                    .iter()
                    .map(|s| {
                        serde_json::json!({"tenant": s.tenant_id, "project": s.project_id,
                        "producer_kind": s.producer_kind, "producer": s.producer_id,
                        "acknowledged_sequence": s.acknowledged_sequence,
                        "replay_floor": s.replay_floor, "retained_ahead": s.retained_ahead,
                        "created_at": s.created_at, "updated_at": s.updated_at})
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(rows));
            } else {
                println!("producer\tacknowledged\tfloor\tretained-ahead");
                for s in rows {
                    println!(
                        "{}:{}\t{}\t{}\t{}",
                        s.producer_kind,
                        s.producer_id,
                        s.acknowledged_sequence,
                        s.replay_floor,
                        s.retained_ahead
                    );
                }
            }
        }
        StreamsCommand::AdvanceFloor {
            target,
            floor,
            operator,
            reason,
        } => {
            let stream = target.stream()?;
            let mut tx = pool.begin().await?;
            let change =
                streams::advance_floor(&mut tx, &stream, floor, &operator, &reason).await?;
            tx.commit().await?;
            println!("replay floor {} -> {}", change.before, change.after);
        }
        StreamsCommand::Skip {
            target,
            to,
            operator,
            reason,
        } => {
            let stream = target.stream()?;
            let mut tx = pool.begin().await?;
            let change = streams::skip(&mut tx, &stream, to, &operator, &reason).await?;
            tx.commit().await?;
            println!(
                "acknowledged sequence {} -> {}",
                change.before, change.after
            );
        }
    }
    Ok(())
}
