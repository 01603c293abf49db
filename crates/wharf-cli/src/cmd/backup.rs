//! `wharf backup`, `wharf restore`: every wharf table at one snapshot, with PostgreSQL's own
//! `pg_dump`/`pg_restore` from the installation the embedded launcher uses.
//!
//! `pg_dump` reads the whole dump inside one repeatable-read transaction, so identities,
//! payloads, cursors, audit and actions are always mutually consistent in a backup. Only the
//! `wharf` schema is dumped: an application sharing the database keeps its own backups.
//! A restore ends with `wharf verify`'s checks, and fails loudly when they do not hold.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

use crate::config::Config;
use crate::db::{Database, Open};

/// `wharf backup` options.
#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    /// The file to write (PostgreSQL custom format).
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
}

/// `wharf restore` options.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// A file written by `wharf backup`.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Replace an existing wharf schema in the target database (its data is lost).
    #[arg(long)]
    replace: bool,
}

/// `wharf backup`.
pub async fn backup(config: &Config, args: BackupArgs) -> anyhow::Result<()> {
    let db = Database::open(
        config,
        Open {
            migrate: false,
            connections_max: 1,
            wait: crate::db::Wait::ONCE,
        },
    )
    .await?;
    let spinner = super::progress::spinner("writing the backup");
    let mut cmd = Command::new(program("pg_dump")?);
    cmd.args([
        "--format=custom",
        "--schema=wharf",
        "--no-owner",
        "--no-privileges",
    ])
    .arg("--file")
    .arg(&args.out)
    .arg("--dbname")
    .arg(&db.url);
    let result = run(cmd, "pg_dump");
    spinner.finish_and_clear();
    db.close().await?;
    result?;
    println!("backup written to {}", args.out.display());
    Ok(())
}

/// `wharf restore`.
pub async fn restore(config: &Config, args: RestoreArgs) -> anyhow::Result<()> {
    if !args.file.is_file() {
        bail!("{} is not a file", args.file.display());
    }
    let db = Database::open_as_is(config, Open::ADMIN).await?;
    let exists = wharf::verify::schema_exists(&db.pool).await?;
    if exists && !args.replace {
        db.close().await?;
        bail!("the target database already has a wharf schema; pass --replace to overwrite it");
    }
    if exists {
        wharf::verify::drop_schema(&db.pool).await?;
    }
    let spinner = super::progress::spinner("restoring");
    let mut cmd = Command::new(program("pg_restore")?);
    // One transaction: a restore that fails half-way leaves nothing behind.
    cmd.args([
        "--no-owner",
        "--no-privileges",
        "--single-transaction",
        "--exit-on-error",
    ])
    .arg("--dbname")
    .arg(&db.url)
    .arg(&args.file);
    let restored = run(cmd, "pg_restore");
    spinner.finish_and_clear();
    if let Err(e) = restored {
        db.close().await?;
        return Err(e);
    }
    let report = wharf::verify::run(&db.pool).await;
    db.close().await?;
    let report = report?;
    super::verify::print(&report, false);
    if !report.ok() {
        bail!(
            "the restored database breaks {} invariant(s)",
            report.violations()
        );
    }
    println!("restored from {}", args.file.display());
    Ok(())
}

fn program(name: &str) -> anyhow::Result<PathBuf> {
    let binaries = wharf_pg::Binaries::locate()?;
    Ok(binaries.bin_dir.join(name))
}

fn run(mut cmd: Command, name: &str) -> anyhow::Result<()> {
    let output = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("cannot run {name}"))?;
    if !output.status.success() {
        bail!(
            "{name} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}
