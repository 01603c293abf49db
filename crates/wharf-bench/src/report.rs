//! What every benchmark report carries besides its figures: the machine and server it ran on,
//! the process's memory, progress bars, and the formatting of table cells.
//!
//! Owns: [`Machine`] (cores, memory, PostgreSQL version and durability settings, load average
//! before and after, wharf version and commit), RSS readings, the counter bar and the spinner.
//! Must not know: any benchmark's figures.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use sqlx::PgPool;

/// Where a report was measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Machine {
    /// CPUs this process may use.
    pub(crate) cores: usize,
    /// Physical memory, MiB.
    pub(crate) memory_mib: Option<u64>,
    /// `SHOW server_version`.
    pub(crate) server_version: String,
    /// `SHOW fsync`.
    pub(crate) fsync: String,
    /// `SHOW synchronous_commit`.
    pub(crate) synchronous_commit: String,
    /// `SHOW shared_buffers`.
    pub(crate) shared_buffers: String,
    /// `/proc/loadavg` (1, 5, 15 minutes) when the command started.
    pub(crate) load_start: String,
    /// The same when it ended.
    pub(crate) load_end: String,
    /// wharf's version.
    pub(crate) version: &'static str,
    /// The commit the binary was built from ([`build_commit`]), or else the commit of the
    /// checkout it runs from, marked `checkout …` (which a binary built earlier, or copied
    /// elsewhere, does not share).
    pub(crate) commit: String,
}

impl Machine {
    /// Reads the machine and the server now (the load at the end is filled in by [`Machine::end`]).
    pub(crate) async fn probe(pool: &PgPool) -> anyhow::Result<Machine> {
        let show = |setting: &'static str| async move {
            sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(format!("SHOW {setting}")))
                .fetch_one(pool)
                .await
        };
        let version = show("server_version").await?;
        Ok(Machine {
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            memory_mib: memory_mib(),
            server_version: version
                .split_whitespace()
                .next()
                .unwrap_or(&version)
                .to_owned(),
            fsync: show("fsync").await?,
            synchronous_commit: show("synchronous_commit").await?,
            shared_buffers: show("shared_buffers").await?,
            load_start: load_average(),
            load_end: String::new(),
            version: env!("CARGO_PKG_VERSION"),
            commit: git_commit(),
        })
    }

    /// Records the load average at the end.
    pub(crate) fn end(&mut self) {
        self.load_end = load_average();
    }

    /// One line for the top of a human report.
    pub(crate) fn line(&self) -> String {
        format!(
            "machine: {} cores, {} MiB, PostgreSQL {} (fsync={}, synchronous_commit={}, shared_buffers={}), load {} → {}, wharf {} {}",
            self.cores,
            self.memory_mib.map_or("?".into(), |m| m.to_string()),
            self.server_version,
            self.fsync,
            self.synchronous_commit,
            self.shared_buffers,
            self.load_start,
            self.load_end,
            self.version,
            self.commit,
        )
    }
}

/// The 1, 5 and 15 minute load averages.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "?".into())
}

fn memory_mib() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib / 1024)
}

/// The commit this binary was built from, when its build stamped one: `WHARF_BUILD_COMMIT` in
/// the environment of `cargo build` (bench/README.md shows the command). A benchmark binary is
/// often copied away from its checkout, a baseline always is, so only a stamp says which code
/// a figure came from. Read where it is compiled: setting or changing it rebuilds this crate
/// and the binary, nothing below them.
pub fn build_commit() -> Option<&'static str> {
    option_env!("WHARF_BUILD_COMMIT").filter(|commit| !commit.is_empty())
}

/// The report's commit: the build's stamp, or else the checkout next to the executable, marked
/// `checkout`, with `-dirty` when its tree has changes (a figure from uncommitted code cannot
/// be reproduced from the hash); "unknown" with neither.
fn git_commit() -> String {
    if let Some(stamped) = build_commit() {
        return stamped.to_owned();
    }
    let dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(std::path::Path::to_path_buf));
    let git = |args: &[&str]| {
        let mut cmd = std::process::Command::new("git");
        if let Some(dir) = &dir {
            cmd.current_dir(dir);
        }
        cmd.args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(hash) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            format!("checkout {hash}{}", if dirty { "-dirty" } else { "" })
        }
        None => "unknown".into(),
    }
}

/// This process's resident set now and its peak since the last [`reset_peak_rss`], MiB.
pub(crate) fn rss_mib() -> (Option<f64>, Option<f64>) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return (None, None);
    };
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kib| kib.parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets the peak resident set to the current one (Linux: `5` into `/proc/self/clear_refs`),
/// so the peak after a phase is that phase's own. Harmless where unsupported.
pub(crate) fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// A spinner with a message, ticking on its own until finished. The same as the CLI's
/// (`wharf-cli/src/cmd/progress.rs`): written twice rather than shared, because the two crates
/// share nothing below the library, and a terminal spinner is not the library's business.
pub(crate) fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_owned());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// A progress bar counting to `len` on stderr; drawn only on a terminal.
pub(crate) fn counter_bar(len: u64, message: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} {per_sec} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(message.to_owned());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A number for a table cell: `-` when absent, otherwise with `decimals` digits.
pub(crate) fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.decimals$}"))
}

/// Two numbers as `a/b` for a table cell.
pub(crate) fn pair(a: Option<f64>, b: Option<f64>, decimals: usize) -> String {
    format!("{}/{}", cell(a, decimals), cell(b, decimals))
}

/// Prints one JSON value as one line on stdout.
pub(crate) fn json_line(value: &impl Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(value)?);
    Ok(())
}

/// Prints rows as a table with left-aligned columns sized to their widest cell.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, c) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            let w = widths.get(i).copied().unwrap_or(0);
            out.push_str(c);
            if i + 1 < cells.len() {
                out.push_str(&" ".repeat(w.saturating_sub(c.chars().count()) + 2));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}
