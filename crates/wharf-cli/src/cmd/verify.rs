//! `wharf verify`: checks the database's invariants and exits non-zero when one is broken.

use anyhow::bail;

use crate::config::Config;
use crate::db::{Database, Open};

/// `wharf verify` options.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `wharf verify`.
pub async fn run(config: &Config, args: VerifyArgs) -> anyhow::Result<()> {
    let db = Database::open(config, Open::ADMIN).await?;
    let report = wharf::verify::run(&db.pool).await;
    db.close().await?;
    let report = report?;
    print(&report, args.json);
    if !report.ok() {
        bail!("{} invariant(s) broken", report.violations());
    }
    Ok(())
}

/// Prints a report: one line per check, or one JSON document.
pub fn print(report: &wharf::verify::Report, json: bool) {
    if json {
        let checks: Vec<serde_json::Value> = report
            .checks
            .iter()
            .map(
                |c| serde_json::json!({"name": c.name, "rule": c.rule, "violations": c.violations}),
            )
            .collect();
        println!(
            "{}",
            serde_json::json!({"ok": report.ok(), "checks": checks})
        );
        return;
    }
    for check in &report.checks {
        let mark = if check.violations == 0 {
            "ok  "
        } else {
            "FAIL"
        };
        println!(
            "{mark} {:<28} {} ({} rows)",
            check.name, check.rule, check.violations
        );
    }
}
