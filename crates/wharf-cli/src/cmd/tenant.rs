//! `wharf tenant create|list`: the inbox's tenants.

use crate::config::Config;
use crate::db::{Database, Open};

/// `wharf tenant` options.
#[derive(Debug, clap::Args)]
pub struct TenantArgs {
    #[command(subcommand)]
    command: TenantCommand,
}

#[derive(Debug, clap::Subcommand)]
enum TenantCommand {
    /// Create a tenant (idempotent: an existing one is left as it is).
    Create {
        /// The tenant id (`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`).
        tenant: String,
    },
    /// List tenants.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `wharf tenant`.
pub async fn run(config: &Config, args: TenantArgs) -> anyhow::Result<()> {
    let db = Database::open(config, Open::ADMIN).await?;
    let result = match args.command {
        TenantCommand::Create { tenant } => wharf::inbox::create_tenant(&db.pool, &tenant)
            .await
            .map(|created| {
                if created {
                    println!("created tenant {tenant}");
                } else {
                    println!("tenant {tenant} already exists");
                }
            }),
        TenantCommand::List { json } => wharf::inbox::list_tenants(&db.pool).await.map(|tenants| {
            if json {
                let rows: Vec<_> = tenants
                    .iter()
                    .map(|(t, at)| serde_json::json!({"tenant": t, "created_at": at}))
                    .collect();
                println!("{}", serde_json::Value::Array(rows));
            } else {
                if tenants.is_empty() {
                    println!("no tenants (`wharf tenant create <id>` makes one)");
                }
                for (tenant, created_at) in tenants {
                    println!("{tenant}\t{}", created_at.to_rfc3339());
                }
            }
        }),
    };
    db.close().await?;
    Ok(result?)
}
