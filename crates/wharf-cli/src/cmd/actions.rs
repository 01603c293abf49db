//! `wharf actions show`, `wharf drain`, `wharf dead-letters`: the outbox from the command line.
//! The operator actions (`cancel`, `resolve`, `resolutions`) live in `operator.rs`.

use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::json;

use crate::compose;
use crate::config::Config;
use crate::db::{Database, Open};

/// `wharf actions` commands.
#[derive(Debug, clap::Args)]
pub struct ActionsArgs {
    #[command(subcommand)]
    command: ActionsCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ActionsCommand {
    /// List actions in id order, a page at a time.
    List {
        /// Only this state (PROPOSED, ADMITTED, EXECUTING, DONE, UNCERTAIN, FAILED, CANCELLED).
        #[arg(long)]
        state: Option<wharf::outbox::ActionState>,
        /// Only this kind.
        #[arg(long)]
        kind: Option<String>,
        /// Only this tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// Only ids above this one (the last id of the previous page).
        #[arg(long)]
        after: Option<i64>,
        /// Rows on the page, 1..=100.
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one action (an ended one has no payload).
    Show {
        /// The action id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel an action that has not started (PROPOSED or ADMITTED); audited.
    Cancel {
        /// The action id.
        id: i64,
        #[command(flatten)]
        who: super::operator::OperatorArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Record what you found out about an UNCERTAIN action, optionally sending it again.
    Resolve {
        /// The action id.
        id: i64,
        /// `delivered` or `not-delivered`.
        #[arg(long)]
        finding: String,
        /// Why you think so (at most 512 bytes).
        #[arg(long, default_value = "")]
        note: String,
        /// Send it again with this JSON payload (only with `not-delivered`).
        #[arg(long)]
        resend_payload: Option<String>,
        #[command(flatten)]
        who: super::operator::OperatorArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The resolutions recorded for one action, oldest first.
    Resolutions {
        /// The action id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `wharf drain` options.
#[derive(Debug, clap::Args)]
pub struct DrainArgs {}

/// `wharf dead-letters` options.
#[derive(Debug, clap::Args)]
pub struct DeadLettersArgs {
    /// The tenant (required: dead letters are only read within one scope).
    #[arg(long)]
    tenant: String,
    /// The project (required).
    #[arg(long)]
    project: String,
    /// Continue after this cursor (printed as `next` by the previous page).
    #[arg(long)]
    after: Option<String>,
    /// Rows on the page, 1..=100.
    #[arg(long, default_value_t = 100)]
    limit: u32,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `wharf actions …`.
pub async fn run(config: &Config, args: ActionsArgs) -> anyhow::Result<()> {
    use super::operator;
    // Operator actions open their own connection (and, for resolve, the registry).
    let args = match args.command {
        ActionsCommand::Cancel { id, who, json } => {
            return operator::cancel(config, id, who, json).await;
        }
        ActionsCommand::Resolve {
            id,
            finding,
            note,
            resend_payload,
            who,
            json,
        } => {
            return operator::resolve(config, id, &finding, note, resend_payload, who, json).await;
        }
        ActionsCommand::Resolutions { id, json } => {
            return operator::resolutions(config, id, json).await;
        }
        command => ActionsArgs { command },
    };
    let db = Database::open(config, Open::ADMIN).await?;
    let result = match args.command {
        ActionsCommand::List {
            state,
            kind,
            tenant,
            after,
            limit,
            json,
        } => {
            if limit == 0 {
                bail!("--limit must be 1..=100");
            }
            let filter = wharf::outbox::ListFilter {
                state,
                kind,
                tenant_id: tenant,
                after_id: after,
                limit,
            };
            list(&db, &filter, json).await
        }
        ActionsCommand::Show { id, json } => show(&db, id, json).await,
        _ => unreachable!("operator commands returned above"),
    };
    db.close().await?;
    result
}

async fn list(
    db: &Database,
    filter: &wharf::outbox::ListFilter,
    as_json: bool,
) -> anyhow::Result<()> {
    let page = wharf::outbox::list(&db.pool, filter).await?;
    // What the executors are told to skip, beside what waits: a paused kind's actions look
    // stuck otherwise.
    let pauses = wharf::outbox::pauses(&db.pool).await?;
    if as_json {
        let items: Vec<_> = page.iter().map(view_json).collect();
        let next = (page.len() as u32 == filter.limit).then(|| page.last().map(|v| v.id));
        println!(
            "{}",
            json!({"items": items, "next_after": next.flatten(), "paused": pauses})
        );
        return Ok(());
    }
    super::kinds::print_pauses(&pauses);
    if page.is_empty() {
        println!("no actions");
    }
    for view in &page {
        println!(
            "{:>10}  {:<10} {:<10} {:<24} attempt {}/{}  {}",
            view.id,
            view.kind,
            view.state.as_str(),
            view.stop_reason.map(|r| r.as_str()).unwrap_or("-"),
            view.attempt,
            view.max_attempts,
            view.idempotency_key
        );
    }
    if let Some(last) = page.last().filter(|_| page.len() as u32 == filter.limit) {
        println!("next: --after {}", last.id);
    }
    Ok(())
}

fn view_json(view: &wharf::outbox::ActionView) -> serde_json::Value {
    json!({
            "id": view.id, "kind": view.kind, "tenant_id": view.tenant_id,
            "project_id": view.project_id, "lane_key": view.lane_key,
            "idempotency_key": view.idempotency_key, "state": view.state.as_str(),
            "stop_reason": view.stop_reason.map(|r| r.as_str()), "attempt": view.attempt,
            "max_attempts": view.max_attempts, "epoch": view.epoch,
            "error_code": view.error_code, "readback_ref": view.readback_ref,
            "payload": view.payload, "run_at": view.run_at, "created_at": view.created_at,
            "ended_at": view.ended_at,
    })
}

async fn show(db: &Database, id: i64, as_json: bool) -> anyhow::Result<()> {
    let Some(view) = wharf::outbox::get(&db.pool, id).await? else {
        bail!("no action {id}");
    };
    if as_json {
        println!("{}", view_json(&view));
        return Ok(());
    }
    println!("action        {}", view.id);
    println!("kind          {}", view.kind);
    println!(
        "scope         {} / {}",
        view.tenant_id.as_deref().unwrap_or("(instance)"),
        view.project_id.as_deref().unwrap_or("-")
    );
    println!("lane          {}", view.lane_key);
    println!("key           {}", view.idempotency_key);
    match view.stop_reason {
        Some(reason) => println!("state         {} ({reason})", view.state),
        None => println!("state         {}", view.state),
    }
    println!("attempts      {} of {}", view.attempt, view.max_attempts);
    if let Some(code) = &view.error_code {
        println!("error code    {code}");
    }
    println!("run at        {}", view.run_at);
    if let Some(ended) = view.ended_at {
        println!("ended at      {ended}");
    }
    Ok(())
}

/// `wharf drain`: makes every waiting action due and runs the executor until none is.
pub async fn drain(config: &Config, _args: DrainArgs) -> anyhow::Result<()> {
    let registry = Arc::new(compose::registry(config)?);
    let db = Database::open(
        config,
        Open {
            migrate: true,
            connections_max: 8,
            wait: crate::db::Wait::ONCE,
        },
    )
    .await?;
    let executor = compose::executor(config, db.pool.clone(), registry)?;
    let spinner = super::progress::spinner("draining");
    let counting = std::io::IsTerminal::is_terminal(&std::io::stderr())
        .then(|| tokio::spawn(show_left(db.pool.clone(), spinner.clone())));
    let report = executor.drain().await;
    if let Some(counting) = counting {
        counting.abort();
    }
    spinner.finish_and_clear();
    db.close().await?;
    let report = report.context("drain failed")?;
    println!(
        "ran {} attempt(s) in {} round(s){}",
        report.attempts,
        report.rounds,
        if report.finished {
            ""
        } else {
            "; stopped at the round limit with actions still due"
        }
    );
    if !report.finished {
        bail!("drain did not finish");
    }
    Ok(())
}

/// Shows on the spinner how many actions are still to run, of how many there were, twice a
/// second (only on a terminal: nobody reads a spinner in a log).
async fn show_left(pool: sqlx::PgPool, spinner: indicatif::ProgressBar) {
    // The most seen at once: actions enqueued while draining raise it.
    let mut total: i64 = 0;
    loop {
        let left: Result<i64, _> = sqlx::query_scalar(
            "SELECT count(*) FROM wharf.action_live WHERE state IN ('ADMITTED', 'EXECUTING')",
        )
        .fetch_one(&pool)
        .await;
        if let Ok(left) = left {
            total = total.max(left);
            spinner.set_message(format!("draining: {left} of {total} action(s) left to run"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// `wharf dead-letters`: one page of FAILED actions of one tenant and project.
pub async fn dead_letters(config: &Config, args: DeadLettersArgs) -> anyhow::Result<()> {
    let after = args
        .after
        .as_deref()
        .map(str::parse::<wharf::outbound::Cursor>)
        .transpose()?;
    let db = Database::open(config, Open::ADMIN).await?;
    let page = wharf::outbound::dead_letters(
        &db.pool,
        &args.tenant,
        &args.project,
        after.as_ref(),
        Some(args.limit),
    )
    .await;
    db.close().await?;
    let page = page?;
    if args.json {
        let next = page.next.map(|c| c.to_string());
        println!("{}", json!({"items": page.items, "next_cursor": next}));
        return Ok(());
    }
    if page.items.is_empty() {
        println!("no dead letters");
    }
    for item in &page.items {
        println!(
            "{:>10}  {}  {:<12} {:<20} {:<24} attempts {}  {}",
            item.id,
            item.ended_at.format("%Y-%m-%d %H:%M:%S"),
            item.kind,
            item.stop_reason.as_str(),
            item.error_code.as_deref().unwrap_or("-"),
            item.attempt,
            item.idempotency_key
        );
    }
    if let Some(next) = page.next {
        println!("next: --after {next}");
    }
    Ok(())
}
