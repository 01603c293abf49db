//! `wharf db status|stop`: the embedded PostgreSQL under `<data-dir>/pg`, looked at and
//! stopped without starting it.
//!
//! Several wharf processes may share one embedded cluster (a `serve`, a `work`, admin commands):
//! each holds it while it runs and the last one out stops it, and a cluster left running by a
//! killed process is adopted by the next one (see `wharf_pg`'s module docs). `status` shows who
//! holds it; `stop` stops it when nobody does (or under them with `--force`).
//!
//! Must not know: anything inside the database.

use anyhow::bail;

use crate::config::Config;

/// `wharf db` commands.
#[derive(Debug, clap::Args)]
pub struct DbArgs {
    #[command(subcommand)]
    command: DbCommand,
}

#[derive(Debug, clap::Subcommand)]
enum DbCommand {
    /// Whether the embedded PostgreSQL runs, on which port, and which wharf processes use it.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the embedded PostgreSQL. Refused while wharf processes use it, unless --force.
    Stop {
        /// Stop it even though wharf processes use it (they lose their database).
        #[arg(long)]
        force: bool,
    },
}

/// `wharf db …`.
pub async fn run(config: &Config, args: DbArgs) -> anyhow::Result<()> {
    if config.database_url.is_some() {
        bail!(
            "`wharf db` manages the embedded PostgreSQL, but a database URL is configured \
             (--database-url, DATABASE_URL or database_url in the file); that server is managed \
             outside wharf"
        );
    }
    let dir = config.data_dir.join("pg");
    match args.command {
        DbCommand::Status { json } => {
            let status = tokio::task::spawn_blocking(move || wharf_pg::status(&dir)).await??;
            print_status(&status, json);
        }
        DbCommand::Stop { force } => {
            let shown = dir.display().to_string();
            let stopped =
                tokio::task::spawn_blocking(move || wharf_pg::stop_dir(&dir, force)).await??;
            match stopped {
                wharf_pg::Stopped::Stopped => {
                    println!("stopped the embedded PostgreSQL in {shown}")
                }
                _ => println!("the embedded PostgreSQL in {shown} is not running"),
            }
        }
    }
    Ok(())
}

fn print_status(status: &wharf_pg::Status, json: bool) {
    let holders: Vec<String> = status
        .holders
        .iter()
        .map(|h| match &h.command {
            Some(command) => format!("{} ({command})", h.pid),
            None => h.pid.to_string(),
        })
        .collect();
    if json {
        let holders: Vec<serde_json::Value> = status
            .holders
            .iter()
            .map(|h| serde_json::json!({"pid": h.pid, "command": h.command}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"dir": status.dir, "initialised": status.initialised,
                               "running": status.port.is_some(), "port": status.port,
                               "holders": holders})
        );
        return;
    }
    let dir = status.dir.display();
    match (status.initialised, status.port) {
        (false, _) => println!("no embedded PostgreSQL in {dir} yet (the first command makes one)"),
        (true, None) => println!("the embedded PostgreSQL in {dir} is stopped"),
        (true, Some(port)) => {
            println!("the embedded PostgreSQL in {dir} runs on 127.0.0.1:{port}");
            if holders.is_empty() {
                println!(
                    "used by no wharf process (left by one that was killed; the next wharf \
                     command adopts it, or `wharf db stop` stops it)"
                );
            } else {
                println!("used by: {}", holders.join(", "));
            }
        }
    }
}
