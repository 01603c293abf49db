//! `wharf credential issue|list|revoke`: producers' bearer credentials. A token is printed once,
//! at issue; wharf keeps only its hash.

use crate::config::Config;
use crate::db::{Database, Open};

/// `wharf credential` options.
#[derive(Debug, clap::Args)]
pub struct CredentialArgs {
    #[command(subcommand)]
    command: CredentialCommand,
}

#[derive(Debug, clap::Subcommand)]
enum CredentialCommand {
    /// Issue a credential and print its token (shown this once).
    Issue {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// The account the producer acts as.
        #[arg(long)]
        account: String,
        /// The device, when the producer is one (its stream is then the device's).
        #[arg(long)]
        device: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List a tenant's credentials (never their tokens).
    List {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a credential: it stops authenticating at once.
    Revoke {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// The credential id (from `list`).
        id: i64,
    },
}

/// `wharf credential`.
pub async fn run(config: &Config, args: CredentialArgs) -> anyhow::Result<()> {
    let db = Database::open(config, Open::ADMIN).await?;
    let result = match args.command {
        CredentialCommand::Issue {
            tenant,
            account,
            device,
            json,
        } => wharf::inbox::issue_credential(&db.pool, &tenant, &account, device.as_deref())
            .await
            .map(|c| {
                if json {
                    println!(
                        "{}",
                        serde_json::json!({"id": c.credential_id, "tenant": c.tenant,
                            "account": c.account, "device": c.device, "token": c.token})
                    );
                } else {
                    eprintln!(
                        "credential {} issued; the token is shown only this once:",
                        c.credential_id
                    );
                    println!("{}", c.token);
                }
            }),
        CredentialCommand::List { tenant, json } => {
            wharf::inbox::list_credentials(&db.pool, &tenant)
                .await
                .map(|rows| {
                    if json {
                        let rows: Vec<_> = rows
                            .iter()
                            .map(|c| {
                                serde_json::json!({"id": c.credential_id, "tenant": c.tenant_id,
                            "account": c.account_id, "device": c.device_id,
                            "created_at": c.created_at, "revoked_at": c.revoked_at})
                            })
                            .collect();
                        println!("{}", serde_json::Value::Array(rows));
                    } else {
                        for c in rows {
                            println!(
                                "{}\t{}\t{}\t{}",
                                c.credential_id,
                                c.account_id,
                                c.device_id.as_deref().unwrap_or("-"),
                                c.revoked_at.map_or_else(
                                    || "live".to_owned(),
                                    |at| format!("revoked {}", at.to_rfc3339())
                                ),
                            );
                        }
                    }
                })
        }
        CredentialCommand::Revoke { tenant, id } => {
            wharf::inbox::revoke_credential(&db.pool, &tenant, id)
                .await
                .map(|()| println!("credential {id} revoked"))
        }
    };
    db.close().await?;
    Ok(result?)
}
