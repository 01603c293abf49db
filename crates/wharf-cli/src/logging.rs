//! Tracing output: human-readable by default, one JSON object per line with
//! `--log-format json`. The filter comes from `WHARF_LOG` (or `RUST_LOG`); without one, servers
//! and long jobs log at `info` and short admin commands at `warn`, so that `wharf tenant list`
//! prints its answer, not the embedded cluster's comings and goings.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// The filter when `WHARF_LOG` and `RUST_LOG` say nothing, for servers and long jobs.
pub const FILTER_DEFAULT: &str = "info,sqlx=warn";
/// The filter when they say nothing, for short admin commands.
pub const FILTER_ADMIN_DEFAULT: &str = "warn";

/// Installs the global subscriber. Logs go to stderr, so command output on stdout stays clean.
pub fn init(format: LogFormat, admin: bool) {
    let default = if admin {
        FILTER_ADMIN_DEFAULT
    } else {
        FILTER_DEFAULT
    };
    let filter = EnvFilter::try_from_env("WHARF_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Human => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
}
