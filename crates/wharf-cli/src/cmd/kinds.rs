//! `wharf kinds list|pause|resume` and `wharf redrive`: steering what the executors claim.
//!
//! A pause stops claims of a kind (or of one tenant of it) on every replica within a second;
//! nothing already running is interrupted. `wharf redrive` delivers envelope dead letters of
//! one scope again, byte for byte, a dry run unless `--apply`. Each calls one library function
//! and prints what it returns (`--json` for scripts); who did it goes to the operator audit.

use anyhow::Context;
use serde_json::json;

use super::operator::OperatorArgs;
use crate::compose;
use crate::config::Config;
use crate::db::{Database, Open};

/// `wharf kinds` options.
#[derive(Debug, clap::Args)]
pub struct KindsArgs {
    #[command(subcommand)]
    command: KindsCommand,
}

#[derive(Debug, clap::Subcommand)]
enum KindsCommand {
    /// Every registered kind, and the pauses in force.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop claims of a kind, or of one tenant of it; what runs finishes.
    Pause {
        /// The kind (see `wharf kinds list`).
        kind: String,
        /// Only this tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// Why (at most 512 bytes), kept with the pause.
        #[arg(long, default_value = "")]
        note: String,
        #[command(flatten)]
        who: OperatorArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// End a pause: the kind-wide one, or one tenant's with `--tenant`.
    Resume {
        /// The kind.
        kind: String,
        /// Only this tenant's pause.
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        who: OperatorArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `wharf redrive` options.
#[derive(Debug, clap::Args)]
pub struct RedriveArgs {
    /// The tenant (required: never across tenants).
    #[arg(long)]
    tenant: String,
    /// The project (required).
    #[arg(long)]
    project: String,
    /// Only dead letters with this error code.
    #[arg(long)]
    error_code: Option<String>,
    /// Only dead letters that ended after this time (RFC 3339).
    #[arg(long)]
    ended_after: Option<chrono::DateTime<chrono::Utc>>,
    /// At most this many, 1..=100 (run again for the next ones).
    #[arg(long, default_value_t = wharf::outbound::REDRIVE_BATCH_MAX)]
    limit: u32,
    /// Redrive them; without it, only list what would be redriven.
    #[arg(long)]
    apply: bool,
    #[command(flatten)]
    who: OperatorArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `wharf kinds …`.
pub async fn run(config: &Config, args: KindsArgs) -> anyhow::Result<()> {
    let registry = compose::registry(config)?;
    let db = Database::open(config, Open::ADMIN).await?;
    let result = match args.command {
        KindsCommand::List { json } => list(&db, &registry, json).await,
        KindsCommand::Pause {
            kind,
            tenant,
            note,
            who,
            json,
        } => pause(&db, &registry, &kind, tenant.as_deref(), &note, who, json).await,
        KindsCommand::Resume {
            kind,
            tenant,
            who,
            json,
        } => resume(&db, &registry, &kind, tenant.as_deref(), who, json).await,
    };
    db.close().await?;
    result
}

async fn list(
    db: &Database,
    registry: &wharf::outbox::Registry,
    as_json: bool,
) -> anyhow::Result<()> {
    let pauses = wharf::outbox::pauses(&db.pool).await?;
    let mut kinds: Vec<&str> = registry.kinds().collect();
    kinds.sort_unstable();
    if as_json {
        println!("{}", json!({"kinds": kinds, "pauses": pauses}));
        return Ok(());
    }
    for kind in kinds {
        let of_kind: Vec<&wharf::outbox::Pause> =
            pauses.iter().filter(|p| p.kind == kind).collect();
        let state = if of_kind.iter().any(|p| p.tenant_id.is_none()) {
            "paused".to_owned()
        } else if of_kind.is_empty() {
            "claimed".to_owned()
        } else {
            format!("paused for {} tenant(s)", of_kind.len())
        };
        println!("{kind:<24} {state}");
    }
    print_pauses(&pauses);
    Ok(())
}

/// One line per pause in force (nothing when there is none): `wharf kinds list` and
/// `wharf actions list` print it.
pub fn print_pauses(pauses: &[wharf::outbox::Pause]) {
    for p in pauses {
        println!(
            "paused: {} {} since {} by {}{}",
            p.kind,
            p.tenant_id
                .as_deref()
                .map_or_else(|| "(every tenant)".to_owned(), |t| format!("tenant {t}")),
            p.paused_at.format("%Y-%m-%d %H:%M:%S"),
            p.actor,
            if p.note.is_empty() {
                String::new()
            } else {
                format!(": {}", p.note)
            }
        );
    }
}

async fn pause(
    db: &Database,
    registry: &wharf::outbox::Registry,
    kind: &str,
    tenant: Option<&str>,
    note: &str,
    who: OperatorArgs,
    as_json: bool,
) -> anyhow::Result<()> {
    let operator = who.operator();
    let mut conn = db.pool.acquire().await?;
    let paused = wharf::outbox::pause(&mut conn, registry, &operator, kind, tenant, note).await?;
    if as_json {
        println!(
            "{}",
            json!({"pause": paused.pause, "created": paused.created,
                   "audit_id": paused.audit_id, "correlation_id": operator.correlation_id})
        );
    } else if paused.created {
        println!(
            "paused {kind}{}; replicas stop claiming it within {} ms; audit {} ({})",
            scope(tenant),
            wharf::outbox::PAUSE_REFRESH_MS,
            paused.audit_id.unwrap_or_default(),
            operator.correlation_id
        );
    } else {
        println!(
            "{kind}{} was already paused (since {}); nothing changed",
            scope(tenant),
            paused.pause.paused_at.format("%Y-%m-%d %H:%M:%S")
        );
    }
    Ok(())
}

async fn resume(
    db: &Database,
    registry: &wharf::outbox::Registry,
    kind: &str,
    tenant: Option<&str>,
    who: OperatorArgs,
    as_json: bool,
) -> anyhow::Result<()> {
    let operator = who.operator();
    let mut conn = db.pool.acquire().await?;
    let resumed = wharf::outbox::resume(&mut conn, registry, &operator, kind, tenant).await?;
    if as_json {
        println!(
            "{}",
            json!({"resumed": resumed.ended.is_some(), "ended": resumed.ended,
                   "audit_id": resumed.audit_id, "correlation_id": operator.correlation_id})
        );
    } else if resumed.ended.is_some() {
        println!(
            "resumed {kind}{}; audit {} ({})",
            scope(tenant),
            resumed.audit_id.unwrap_or_default(),
            operator.correlation_id
        );
    } else {
        println!("{kind}{} was not paused; nothing changed", scope(tenant));
    }
    Ok(())
}

fn scope(tenant: Option<&str>) -> String {
    tenant.map_or_else(String::new, |t| format!(" for tenant {t}"))
}

/// `wharf redrive`.
pub async fn redrive(config: &Config, args: RedriveArgs) -> anyhow::Result<()> {
    let operator = args.who.operator();
    let registry = compose::registry(config)?;
    let filter = wharf::outbound::RedriveFilter {
        tenant: args.tenant,
        project: args.project,
        error_code: args.error_code,
        ended_after: args.ended_after,
        limit: args.limit,
    };
    let db = Database::open(config, Open::ADMIN).await?;
    let result = async {
        let mut conn = db.pool.acquire().await?;
        wharf::outbound::redrive(&mut conn, &registry, &operator, &filter, !args.apply)
            .await
            .context("redrive failed; nothing was redriven")
    }
    .await;
    db.close().await?;
    let items = result?;
    let more = items.len() as u32 == filter.limit;
    if args.json {
        println!(
            "{}",
            json!({"dry_run": !args.apply, "items": items, "more": more,
                   "correlation_id": operator.correlation_id})
        );
        return Ok(());
    }
    if items.is_empty() {
        println!("no envelope dead letters to redrive");
    }
    for r in &items {
        println!(
            "{:>10}  {:<32} event {}{}",
            r.original_id,
            r.error_code.as_deref().unwrap_or("-"),
            r.event_id,
            r.action_id
                .map(|id| format!("  redriven as action {id}"))
                .unwrap_or_default()
        );
    }
    if !items.is_empty() && !args.apply {
        println!(
            "dry run: {} would be redriven; run again with --apply",
            items.len()
        );
    }
    if more {
        println!("more may follow: run again for the next {}", filter.limit);
    }
    Ok(())
}
