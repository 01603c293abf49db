//! Tracing output: human-readable by default, one JSON object per line with
//! `--log-format json`. The filter comes from `WHARF_LOG` (or `RUST_LOG`), default `info`.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber. Logs go to stderr, so command output on stdout stays clean.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_env("WHARF_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
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
