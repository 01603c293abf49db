//! `wharf actions cancel|resolve|resolutions` and `wharf audit`: operator actions on the outbox.
//!
//! Each calls one `wharf::outbox` function and prints what it returns (`--json` for scripts).
//! The actor written to the audit is `--actor`, else `$WHARF_ACTOR`, else `$USER`; the
//! correlation id is `--correlation-id`, else a new one, printed so logs can be matched.

use anyhow::Context;
use serde_json::json;

use crate::compose;
use crate::config::Config;
use crate::db::{Database, Open};

/// Who does it: shared by every operator command.
#[derive(Debug, Clone, clap::Args)]
pub struct OperatorArgs {
    /// The name written to the operator audit (default: $WHARF_ACTOR, else $USER).
    #[arg(long, env = "WHARF_ACTOR")]
    actor: Option<String>,
    /// The correlation id written to the audit (default: a new one).
    #[arg(long)]
    correlation_id: Option<String>,
}

impl OperatorArgs {
    pub(crate) fn operator(self) -> wharf::outbox::Operator {
        let actor = self
            .actor
            .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| "cli".to_owned());
        let correlation = self.correlation_id.unwrap_or_else(|| {
            let ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0);
            format!("cli-{ms}-{}", std::process::id())
        });
        wharf::outbox::Operator::new(actor, correlation)
    }
}

/// `wharf actions cancel ID`.
pub async fn cancel(
    config: &Config,
    id: i64,
    who: OperatorArgs,
    as_json: bool,
) -> anyhow::Result<()> {
    let operator = who.operator();
    let db = Database::open(config, Open::ADMIN).await?;
    let result = async {
        let mut conn = db.pool.acquire().await?;
        Ok::<_, anyhow::Error>(wharf::outbox::cancel(&mut conn, &operator, id).await?)
    }
    .await;
    db.close().await?;
    let cancelled = result?;
    if as_json {
        println!(
            "{}",
            json!({"id": cancelled.id, "from": cancelled.from.as_str(), "state": "CANCELLED",
                   "stop_reason": "OPERATOR", "audit_id": cancelled.audit_id,
                   "correlation_id": operator.correlation_id})
        );
    } else {
        println!(
            "cancelled action {} (was {}); audit {} ({})",
            cancelled.id, cancelled.from, cancelled.audit_id, operator.correlation_id
        );
    }
    Ok(())
}

/// `wharf actions resolve ID --finding … [--note …] [--resend-payload JSON]`.
pub async fn resolve(
    config: &Config,
    id: i64,
    finding: &str,
    note: String,
    resend_payload: Option<String>,
    who: OperatorArgs,
    as_json: bool,
) -> anyhow::Result<()> {
    let finding: wharf::outbox::Finding = finding.parse()?;
    let resend = resend_payload
        .as_deref()
        .map(serde_json::from_str::<serde_json::Value>)
        .transpose()
        .context("--resend-payload is not JSON")?;
    let operator = who.operator();
    // The registry checks a resend's kind and payload as an enqueue would.
    let registry = compose::registry(config)?;
    let db = Database::open(config, Open::ADMIN).await?;
    let result = async {
        let mut conn = db.pool.acquire().await?;
        let ask = wharf::outbox::Resolve {
            finding,
            note,
            resend,
        };
        Ok::<_, anyhow::Error>(
            wharf::outbox::resolve(&mut conn, &registry, &operator, id, ask).await?,
        )
    }
    .await;
    db.close().await?;
    let resolved = result?;
    if as_json {
        println!(
            "{}",
            json!({"resolution": resolved.resolution,
                   "resent_action_id": resolved.resent.map(|r| r.id),
                   "resent_created": resolved.resent.map(|r| r.created),
                   "audit_id": resolved.audit_id})
        );
    } else {
        println!(
            "action {id}: recorded {} (resolution {}); audit {} ({})",
            resolved.resolution.finding,
            resolved.resolution.resolution_id,
            resolved.audit_id,
            operator.correlation_id
        );
        if let Some(resent) = resolved.resent {
            let how = if resent.created {
                "enqueued"
            } else {
                "already enqueued"
            };
            println!("resend: action {} {how}", resent.id);
        }
    }
    Ok(())
}

/// `wharf actions resolutions ID`.
pub async fn resolutions(config: &Config, id: i64, as_json: bool) -> anyhow::Result<()> {
    let db = Database::open(config, Open::ADMIN).await?;
    let result = wharf::outbox::resolutions(&db.pool, id).await;
    db.close().await?;
    let items = result?;
    if as_json {
        println!("{}", json!({"items": items}));
        return Ok(());
    }
    if items.is_empty() {
        println!("no resolutions for action {id}");
    }
    for r in &items {
        println!(
            "{:>8}  {}  {:<13} by {}{}  {}",
            r.resolution_id,
            r.recorded_at.format("%Y-%m-%d %H:%M:%S"),
            r.finding.as_str(),
            r.actor,
            r.resent_action_id
                .map(|id| format!(", resent as {id}"))
                .unwrap_or_default(),
            r.note
        );
    }
    Ok(())
}

/// `wharf audit` options.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Only this action's entries.
    #[arg(long)]
    action: Option<i64>,
    /// Only entries after this audit id (printed as `next` by the previous page).
    #[arg(long)]
    after: Option<i64>,
    /// Rows on the page, 1..=100.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100))]
    limit: u32,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `wharf audit`: one page of the one operator audit trail (the admin API's and the CLI's
/// operator actions and everything done in the console), oldest first.
pub async fn audit(config: &Config, args: AuditArgs) -> anyhow::Result<()> {
    let filter = wharf::outbox::AuditFilter {
        action_id: args.action,
        after_id: args.after,
        limit: args.limit,
    };
    let db = Database::open(config, Open::ADMIN).await?;
    let result = wharf::outbox::audit(&db.pool, &filter).await;
    db.close().await?;
    let items = result?;
    let next = (items.len() as u32 == args.limit)
        .then(|| items.last().map(|e| e.audit_id))
        .flatten();
    if args.json {
        println!("{}", json!({"items": items, "next_after": next}));
        return Ok(());
    }
    if items.is_empty() {
        println!("no audit entries");
    }
    for e in &items {
        println!(
            "{:>8}  {}  {:<8} {:<17} by {:<20} {}  {}",
            e.audit_id,
            e.recorded_at.format("%Y-%m-%d %H:%M:%S"),
            e.operation,
            // A console row names what it was done to; the library's, the action.
            e.target.clone().unwrap_or_else(|| e
                .action_id
                .map_or_else(|| "-".to_owned(), |id| format!("action {id}"))),
            e.role.as_deref().map_or_else(
                || e.actor.clone(),
                |role| format!("{} (console, {role})", e.actor)
            ),
            e.correlation_id,
            e.detail
        );
    }
    if let Some(next) = next {
        println!("next: --after {next}");
    }
    Ok(())
}
