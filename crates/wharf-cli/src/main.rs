//! The `wharf` binary: command-line parsing, configuration, logging and composition.
//!
//! Owns: which command runs, how the database is reached (embedded cluster or a URL), and how
//! the library pieces are wired into a server. Must not know: any business rule — every command
//! calls the `wharf` library and prints what it returns.

mod cmd;
mod compose;
mod config;
mod db;
mod logging;
mod report;
mod shutdown;
mod telemetry;

use clap::{Parser, Subcommand};

/// wharf: a durable outbox for side effects and a signed-envelope inbox, on PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "wharf", version = version(), about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    global: config::GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// `wharf --version`: the crate's version, and the commit the build stamped, if any
/// ([`wharf_bench::build_commit`]), so a benchmark binary says which code it is.
fn version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| version_text(env!("CARGO_PKG_VERSION"), wharf_bench::build_commit()))
}

fn version_text(version: &str, commit: Option<&str>) -> String {
    match commit {
        Some(commit) => format!("{version} (commit {commit})"),
        None => version.to_owned(),
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP API (ingest, admin, metrics, health) and the executor.
    Serve(cmd::serve::ServeArgs),
    /// Run the executor only (an extra replica).
    Work(cmd::serve::WorkArgs),
    /// Bring the database schema up to date, then exit.
    Migrate,
    /// Write every wharf table, at one snapshot, to a file.
    Backup(cmd::backup::BackupArgs),
    /// Restore a backup, then check its invariants.
    Restore(cmd::backup::RestoreArgs),
    /// Check the database's invariants; exits non-zero when one is broken.
    Verify(cmd::verify::VerifyArgs),
    /// Benchmarks: outbox drain, enqueue→start latency, inbox ingest, PostgreSQL ceiling.
    Bench(wharf_bench::BenchArgs),
    /// Inspect actions.
    Actions(cmd::actions::ActionsArgs),
    /// The operator audit: every cancel, resolve, redrive, pause and resume, and everything
    /// done in the console; who, when, correlation id.
    Audit(cmd::operator::AuditArgs),
    /// The kinds the executors claim: list them, pause and resume one (or one tenant of it).
    Kinds(cmd::kinds::KindsArgs),
    /// Deliver envelope dead letters of one tenant and project again, the same bytes (a dry
    /// run unless --apply).
    Redrive(cmd::kinds::RedriveArgs),
    /// Make every waiting action due and run the executor until none is.
    Drain(cmd::actions::DrainArgs),
    /// List FAILED actions of one tenant and project, a page at a time.
    DeadLetters(cmd::actions::DeadLettersArgs),
    /// The server's own keys for signing outbound envelopes.
    SigningKey(cmd::outbound::SigningKeyArgs),
    /// Sign a controlplane/v1 envelope with the tenant's current key and deliver it.
    Emit(cmd::outbound::EmitArgs),
    /// Inbox tenants.
    Tenant(cmd::tenant::TenantArgs),
    /// Producer credentials (bearer tokens) of a tenant.
    Credential(cmd::credential::CredentialArgs),
    /// Producers' verification keys per tenant and project.
    Key(cmd::key::KeyArgs),
    /// Producer streams: cursor, replay floor, audited skips.
    Streams(cmd::streams::StreamsArgs),
    /// Sign and send an envelope to a wharf inbox (a producer).
    Send(cmd::send::SendArgs),
    /// Delete what has outlived its retention (inbox payloads, ended actions).
    Retention(cmd::retention::RetentionArgs),
    /// The public key receivers load to verify this server's webhooks (`whpk_…`).
    WebhookKey(cmd::webhook_key::WebhookKeyArgs),
    /// The embedded PostgreSQL: whether it runs, who uses it; stop it.
    Db(cmd::db::DbArgs),
    // New commands go above this line, one variant each, with their module under cmd/.
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // wharf uses one TLS crypto backend, ring; reqwest and lettre need it installed as the
    // process default before they build a client. An Err means it already is.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = match config::Config::load(&cli.global) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {}", report::chain(&e));
            return std::process::ExitCode::FAILURE;
        }
    };
    // Servers and long jobs tell their story at info; an admin command prints its answer.
    let admin = !matches!(
        cli.command,
        Command::Serve(_)
            | Command::Work(_)
            | Command::Migrate
            | Command::Bench(_)
            | Command::Drain(_)
            | Command::Backup(_)
            | Command::Restore(_)
    );
    logging::init(config.log_format, admin);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => cmd::serve::serve(&config, args).await,
            Command::Work(args) => cmd::serve::work(&config, args).await,
            Command::Migrate => cmd::serve::migrate(&config).await,
            Command::Backup(args) => cmd::backup::backup(&config, args).await,
            Command::Restore(args) => cmd::backup::restore(&config, args).await,
            Command::Verify(args) => cmd::verify::run(&config, args).await,
            Command::Bench(args) => cmd::bench::run(&config, args).await,
            Command::Actions(args) => cmd::actions::run(&config, args).await,
            Command::Audit(args) => cmd::operator::audit(&config, args).await,
            Command::Kinds(args) => cmd::kinds::run(&config, args).await,
            Command::Redrive(args) => cmd::kinds::redrive(&config, args).await,
            Command::Drain(args) => cmd::actions::drain(&config, args).await,
            Command::DeadLetters(args) => cmd::actions::dead_letters(&config, args).await,
            Command::SigningKey(args) => cmd::outbound::signing_key(&config, args).await,
            Command::Emit(args) => cmd::outbound::emit(&config, args).await,
            Command::Tenant(args) => cmd::tenant::run(&config, args).await,
            Command::Credential(args) => cmd::credential::run(&config, args).await,
            Command::Key(args) => cmd::key::run(&config, args).await,
            Command::Streams(args) => cmd::streams::run(&config, args).await,
            Command::Send(args) => cmd::send::run(&config, args).await,
            Command::Retention(args) => cmd::retention::run(&config, args).await,
            Command::WebhookKey(args) => cmd::webhook_key::run(&config, args).await,
            Command::Db(args) => cmd::db::run(&config, args).await,
            // New commands are dispatched above this line.
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", report::chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::version_text;

    #[test]
    fn the_version_names_the_stamped_commit_and_only_a_stamped_one() {
        assert_eq!(
            version_text("0.1.0", Some("5bdbcb9a1b2c")),
            "0.1.0 (commit 5bdbcb9a1b2c)"
        );
        assert_eq!(version_text("0.1.0", None), "0.1.0");
    }
}
