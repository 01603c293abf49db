//! `wharf key generate|add|retire|revoke|remove|list`: Ed25519 verification keys per (tenant,
//! project).
//!
//! `generate` prints the private seed once (standard base64) for the producer; the server keeps
//! only the public key. Rotation: generate or add a new key, move producers to it, retire the
//! old one (it verifies for its replay window); revoke a compromised one (it stops at once);
//! remove a revoked one once nothing it signed can be replayed (`wharf serve` does that on its
//! own; `remove` says what still depends on the key when it cannot).

use std::time::Duration;

use crate::config::Config;
use crate::db::{Database, Open};

/// `wharf key` options.
#[derive(Debug, clap::Args)]
pub struct KeyArgs {
    #[command(subcommand)]
    command: KeyCommand,
}

#[derive(Debug, clap::Args)]
struct Scope {
    /// The tenant.
    #[arg(long)]
    tenant: String,
    /// The project.
    #[arg(long)]
    project: String,
}

#[derive(Debug, clap::Subcommand)]
enum KeyCommand {
    /// Generate a key pair; store the public key, print the private seed once.
    Generate {
        #[command(flatten)]
        scope: Scope,
        /// The key id [default: a random one].
        #[arg(long)]
        key_id: Option<String>,
        /// Days a retired key keeps verifying.
        #[arg(long, default_value_t = 90)]
        replay_window_days: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Add a public key (standard base64 of 32 bytes).
    Add {
        #[command(flatten)]
        scope: Scope,
        /// The key id.
        #[arg(long)]
        key_id: String,
        /// The public key, standard base64.
        #[arg(long)]
        public_key: String,
        /// Days a retired key keeps verifying.
        #[arg(long, default_value_t = 90)]
        replay_window_days: u64,
    },
    /// Retire a key: it keeps verifying for its replay window.
    Retire {
        #[command(flatten)]
        scope: Scope,
        /// The key id.
        key_id: String,
    },
    /// Remove a revoked key, once none of the envelopes it signed can be replayed.
    Remove {
        #[command(flatten)]
        scope: Scope,
        /// The key id.
        key_id: String,
        /// Who removes it (written to the audit).
        #[arg(long)]
        operator: String,
        /// Why (written to the audit).
        #[arg(long)]
        reason: String,
    },
    /// Revoke a key: it stops verifying at once.
    Revoke {
        #[command(flatten)]
        scope: Scope,
        /// The key id.
        key_id: String,
    },
    /// List keys of a tenant (of one project with --project).
    List {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// Only this project.
        #[arg(long)]
        project: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn days(n: u64) -> Duration {
    Duration::from_secs(n.saturating_mul(24 * 3600))
}

/// `wharf key`.
pub async fn run(config: &Config, args: KeyArgs) -> anyhow::Result<()> {
    let db = Database::open(config, Open::ADMIN).await?;
    let result = command(&db.pool, args.command).await;
    db.close().await?;
    result
}

async fn command(pool: &sqlx::PgPool, command: KeyCommand) -> anyhow::Result<()> {
    match command {
        KeyCommand::Generate {
            scope,
            key_id,
            replay_window_days,
            json,
        } => {
            let key = wharf::inbox::generate_key(
                pool,
                &scope.tenant,
                &scope.project,
                key_id.as_deref(),
                days(replay_window_days),
            )
            .await?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"key_id": key.key_id, "public_key": key.public_key_base64(),
                        "private_seed": key.private_seed_base64()})
                );
            } else {
                eprintln!(
                    "key {} stored for {}/{}; the private seed is shown only this once:",
                    key.key_id, scope.tenant, scope.project
                );
                println!("{}", key.private_seed_base64());
            }
        }
        KeyCommand::Add {
            scope,
            key_id,
            public_key,
            replay_window_days,
        } => {
            let bytes = wharf::inbox::key_from_base64(&public_key)?;
            wharf::inbox::add_key(
                pool,
                &scope.tenant,
                &scope.project,
                &key_id,
                &bytes,
                days(replay_window_days),
            )
            .await?;
            println!("key {key_id} added to {}/{}", scope.tenant, scope.project);
        }
        KeyCommand::Retire { scope, key_id } => {
            wharf::inbox::retire_key(pool, &scope.tenant, &scope.project, &key_id).await?;
            println!("key {key_id} retired");
        }
        KeyCommand::Revoke { scope, key_id } => {
            wharf::inbox::revoke_key(pool, &scope.tenant, &scope.project, &key_id).await?;
            println!("key {key_id} revoked");
        }
        KeyCommand::Remove {
            scope,
            key_id,
            operator,
            reason,
        } => {
            let mut conn = pool.acquire().await?;
            wharf::inbox::remove_key(
                &mut conn,
                &scope.tenant,
                &scope.project,
                &key_id,
                &operator,
                &reason,
            )
            .await?;
            println!("key {key_id} removed");
        }
        KeyCommand::List {
            tenant,
            project,
            json,
        } => {
            let keys = wharf::inbox::list_keys(pool, &tenant, project.as_deref()).await?;
            if json {
                let rows: Vec<_> = keys
                    .iter()
                    .map(|k| serde_json::json!({"tenant": k.tenant_id, "project": k.project_id,
                        "key_id": k.key_id, "public_key": wharf::inbox::key_to_base64(&k.public_key),
                        "state": k.state, "replay_window_seconds": k.replay_window_seconds,
                        "created_at": k.created_at, "retired_at": k.retired_at,
                        "revoked_at": k.revoked_at}))
                    .collect();
                println!("{}", serde_json::Value::Array(rows));
            } else {
                for k in keys {
                    println!(
                        "{}\t{}\t{}\t{}",
                        k.project_id,
                        k.key_id,
                        k.state,
                        wharf::inbox::key_to_base64(&k.public_key)
                    );
                }
            }
        }
    }
    Ok(())
}
