//! `wharf serve`, `wharf work` and `wharf migrate`: composition of the server and the executor.
//!
//! `serve` and `work` wait for an unreachable database at start-up (see [`crate::db`]);
//! meanwhile `serve` already listens, answering `/healthz` and 503 `starting` on `/readyz`.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::compose;
use crate::config::Config;
use crate::db::{APPLICATION_SERVE, APPLICATION_WORK, Database, Open, Wait};
use crate::shutdown::Stop;

/// Where `serve` listens when nothing else is said: loopback only, so a first run exposes
/// nothing to the network.
pub const LISTEN_DEFAULT: &str = "127.0.0.1:8080";

/// Connections the pool holds beside the executor's share: HTTP handlers, claims, completions,
/// the NOTIFY listener and the sweeps.
pub const SERVE_CONNECTIONS_BASE: u32 = 12;

/// Most connections one process opens. PostgreSQL's default `max_connections` is 100 (the
/// embedded cluster allows 200): leave room for other replicas and for operators.
pub const SERVE_CONNECTIONS_MAX: u32 = 64;

/// The pool size: a connection for every second running attempt (a fence and a notice lookup
/// are short; attempts rarely hold one at the same moment) on top of the base, at most
/// [`SERVE_CONNECTIONS_MAX`]. Too small a pool makes fences wait for a connection and give up,
/// which leaves actions waiting out their lease.
fn pool_size(config: &Config) -> anyhow::Result<u32> {
    let executor = compose::executor_config(config)?;
    Ok((SERVE_CONNECTIONS_BASE + executor.concurrency_max.div_ceil(2)).min(SERVE_CONNECTIONS_MAX))
}

/// How long `serve` and `work` wait for their database at start-up.
#[derive(Debug, clap::Args)]
pub struct StartupArgs {
    /// Milliseconds to keep retrying an unreachable database at start-up before giving up
    /// (0: one attempt) [default: `[startup] deadline_ms`, else 300000].
    #[arg(long, value_name = "MS")]
    startup_deadline_ms: Option<u64>,
}

/// `wharf serve` options.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "WHARF_LISTEN", value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Token for the admin endpoints (`Authorization: Bearer …`). Without one they answer 401.
    #[arg(
        long,
        env = "WHARF_OPERATOR_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    operator_token: Option<String>,
    /// Token of the console's read-only role: signs in to see everything and change nothing.
    #[arg(
        long,
        env = "WHARF_OPERATOR_TOKEN_READ_ONLY",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    operator_token_read_only: Option<String>,
    /// Serve no console (`[console] enabled = false`).
    #[arg(long)]
    no_console: bool,
    /// Serve HTTP only; run no executor in this process.
    #[arg(long)]
    no_executor: bool,
    #[command(flatten)]
    startup: StartupArgs,
}

/// `wharf work` options.
#[derive(Debug, clap::Args)]
pub struct WorkArgs {
    #[command(flatten)]
    startup: StartupArgs,
}

/// The `[serve]` table of the configuration file.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ServeSection {
    listen: Option<SocketAddr>,
    operator_token: Option<String>,
    operator_token_read_only: Option<String>,
}

/// The `[console]` table: the operator console `serve` serves beside the API.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ConsoleSection {
    /// Serve it at all.
    enabled: bool,
    /// Where: `/console`.
    path: String,
    /// How long a sign-in lasts, in milliseconds (default 8 h, at most 24 h).
    session_ms: u64,
    /// Mark the session cookie `Secure` even without `X-Forwarded-Proto: https` (serve behind a
    /// TLS-terminating proxy).
    secure_cookie: bool,
}

impl Default for ConsoleSection {
    fn default() -> ConsoleSection {
        let d = wharf_http::console::ConsoleConfig::default();
        ConsoleSection {
            enabled: true,
            path: d.path,
            session_ms: d.session_ms,
            secure_cookie: d.secure_cookie,
        }
    }
}

/// `wharf serve`: listens at once, answering `/healthz` and (503 `starting`) everything else
/// while it waits for the database; then serves the full API and runs the executor.
pub async fn serve(config: &Config, args: ServeArgs) -> anyhow::Result<()> {
    let section: ServeSection = config.section("serve")?;
    let listen = args
        .listen
        .or(section.listen)
        .unwrap_or_else(|| LISTEN_DEFAULT.parse().expect("the default address parses"));
    // Everything the configuration can get wrong is refused before listening.
    let wait = Wait::from_config(config, args.startup.startup_deadline_ms)?;
    let prometheus = install_prometheus()?;
    crate::telemetry::describe_metrics();
    let registry = Arc::new(compose::registry(config)?);
    compose::executor_config(config)?
        .validate(&registry)
        .context("invalid [executor] configuration")?;
    let token = args
        .operator_token
        .or(section.operator_token)
        .filter(|t| !t.is_empty());
    if token.is_none() {
        tracing::warn!(
            "no operator token configured: the admin endpoints (/v1/actions, dead letters, \
             webhook keys) answer 401; set WHARF_OPERATOR_TOKEN (or --operator-token, or \
             [serve] operator_token) to open them"
        );
    }
    let operator_token = wharf_http::auth::OperatorToken::new(token);
    let read_only_token = wharf_http::auth::OperatorToken::new(
        args.operator_token_read_only
            .or(section.operator_token_read_only),
    );
    let console_section: ConsoleSection = config.section("console")?;
    let console = (console_section.enabled && !args.no_console).then_some(
        wharf_http::console::ConsoleConfig {
            path: console_section.path,
            session_ms: console_section.session_ms,
            secure_cookie: console_section.secure_cookie,
        },
    );
    if let Some(console) = &console {
        console
            .validate()
            .context("invalid [console] configuration")?;
    }
    let (inbox_settings, jetstream) = inbox_section(config)?;
    let housekeeping = inbox_settings
        .housekeeping()
        .context("invalid [inbox] configuration")?;
    let inbox_config = inbox_settings
        .into_config()
        .context("invalid [inbox] configuration")?;
    let webhook_public_keys = super::webhook_key::public_keys(config)?;
    let open = Open {
        migrate: true,
        connections_max: pool_size(config)?,
        wait,
    };

    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "cannot listen on {listen}: the address is in use, most likely by another `wharf \
             serve` (its answers are not this server's); stop it first, or pass --listen \
             with another address"
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot listen on {listen}")),
    };
    tracing::info!(address = %listener.local_addr()?, "wharf serving; waiting for the database");
    if let Some(console) = &console {
        // Printed, not only logged: the README tells a person to open it.
        println!("console: http://{}{}", listener.local_addr()?, console.path);
    }
    let startup = wharf_http::health::Startup::new(match &config.database_url {
        Some(_) => "connecting to PostgreSQL".to_owned(),
        None => "starting the embedded PostgreSQL".to_owned(),
    });

    let stop = Stop::on_signal()?;
    let http = axum::serve(
        listener,
        startup
            .router()
            .into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(stop.clone().wait());
    let work = async {
        let waiting = |what: &str| startup.waiting_for(what);
        let opened = tokio::select! {
            opened = Database::open_running(config, open, APPLICATION_SERVE, &waiting) => opened,
            () = stop.clone().wait() => return (None, Ok(())),
        };
        let db = match opened {
            Ok(db) => db,
            Err(e) => {
                // A server that cannot reach its database by the deadline exits non-zero, so a
                // supervisor sees it and restarts it (or an operator fixes the URL).
                stop.trigger();
                return (None, Err(e));
            }
        };
        let ran: anyhow::Result<()> = async {
            let executor = compose::executor(config, db.pool.clone(), registry.clone())?;
            let inbox = Arc::new(wharf::inbox::Inbox::new(db.pool.clone(), inbox_config));
            // The JetStream consumers: the same inbox, so the same limits, caches and group
            // commit as HTTP.
            let mut consumers = tokio::task::JoinSet::new();
            for entry in jetstream.clone() {
                let name = entry.peer_name();
                let consumer = wharf_nats::JetStreamIngest::new(inbox.clone(), entry)
                    .context("invalid [[inbox.jetstream]] configuration")?;
                let (stop, name) = (stop.clone(), name.clone());
                consumers.spawn(async move {
                    tracing::info!(consumer = %name, "JetStream consumer starting");
                    let ran = consumer.run(stop.clone().wait()).await;
                    if let Err(e) = &ran {
                        // A consumer that can never run (its credentials file) stops the
                        // server rather than leave its stream unread.
                        tracing::error!(consumer = %name, error = %e, "JetStream consumer failed");
                        stop.trigger();
                    }
                    ran
                });
            }
            let mut routers = vec![
                wharf_http::health::routes(db.pool.clone(), Some(prometheus)),
                wharf_http::openapi::routes(),
                wharf_http::actions::routes(
                    db.pool.clone(),
                    registry.clone(),
                    operator_token.clone(),
                ),
                wharf_http::dead_letters::routes(db.pool.clone(), operator_token.clone()),
                wharf_http::signing_keys::routes(db.pool.clone(), operator_token.clone()),
                wharf_http::ingest::routes(inbox),
                wharf_http::webhook_keys::routes(webhook_public_keys, operator_token.clone()),
                // Route modules are added above this line, one entry each.
            ];
            if let Some(console) = console.clone() {
                routers.push(wharf_http::console::routes(
                    db.pool.clone(),
                    registry.clone(),
                    operator_token.clone(),
                    read_only_token.clone(),
                    console,
                )?);
            }
            // Payload retention and the removal of revoked keys nothing depends on, beside
            // the server: a slow run never holds up a request.
            let housekept = tokio::spawn(wharf::inbox::housekeeping_loop(
                db.pool.clone(),
                housekeeping,
                stop.clone().wait(),
            ));
            crate::telemetry::sample_pool(db.pool.clone(), open.connections_max);
            let app = wharf_http::app(routers).layer(axum::middleware::from_fn_with_state(
                crate::telemetry::RequestLog::new(),
                crate::telemetry::log_request,
            ));
            startup.ready(app);
            tracing::info!("wharf ready");
            let executed = if args.no_executor {
                stop.clone().wait().await;
                Ok(())
            } else {
                executor
                    .run(stop.clone().wait())
                    .await
                    .context("the executor failed")
            };
            if executed.is_err() {
                // What waits below stops on the stop signal: raise it, or a failed executor
                // would leave the server waiting for them forever.
                stop.trigger();
            }
            housekept.await.context("the inbox housekeeping panicked")?;
            while let Some(joined) = consumers.join_next().await {
                joined
                    .context("a JetStream consumer panicked")?
                    .context("a JetStream consumer failed")?;
            }
            executed
        }
        .await;
        if ran.is_err() {
            // A server that takes actions but never runs them is worse than none: stop
            // serving too, and exit non-zero.
            stop.trigger();
        }
        (Some(db), ran)
    };
    let (served, (db, worked)) = tokio::join!(http, work);
    let closed = match db {
        Some(db) => db.close().await,
        None => Ok(()),
    };
    served.context("the HTTP server failed")?;
    worked?;
    closed
}

/// The `[inbox]` table: the inbox's own keys, and the `[[inbox.jetstream]]` consumers (each
/// checked now, so a bad one is refused before `serve` listens).
fn inbox_section(
    config: &Config,
) -> anyhow::Result<(
    wharf::inbox::InboxSettings,
    Vec<wharf_nats::JetStreamConfig>,
)> {
    let mut table: toml::Table = config.section("inbox")?;
    let jetstream: Vec<wharf_nats::JetStreamConfig> = match table.remove("jetstream") {
        None => Vec::new(),
        Some(value) => value
            .try_into()
            .context("invalid [[inbox.jetstream]] configuration")?,
    };
    for entry in &jetstream {
        entry
            .validate()
            .with_context(|| format!("invalid [[inbox.jetstream]] entry {}", entry.peer_name()))?;
    }
    let settings = toml::Value::Table(table)
        .try_into()
        .context("invalid [inbox] configuration")?;
    Ok((settings, jetstream))
}

/// `wharf work`: waits for the database (logging every failed attempt), then runs the executor.
pub async fn work(config: &Config, args: WorkArgs) -> anyhow::Result<()> {
    let wait = Wait::from_config(config, args.startup.startup_deadline_ms)?;
    let registry = Arc::new(compose::registry(config)?);
    compose::executor_config(config)?
        .validate(&registry)
        .context("invalid [executor] configuration")?;
    let open = Open {
        migrate: true,
        connections_max: pool_size(config)?,
        wait,
    };
    // Made before the wait for the database, so a SIGTERM at any moment from here on stops it.
    let stop = Stop::on_signal()?;
    let db = tokio::select! {
        db = Database::open_running(config, open, APPLICATION_WORK, &|_| {}) => db?,
        () = stop.clone().wait() => return Ok(()),
    };
    let executor = compose::executor(config, db.pool.clone(), registry)?;
    tracing::info!("wharf working");
    let worked = executor.run(stop.wait()).await;
    let closed = db.close().await;
    worked.context("the executor failed")?;
    closed
}

/// `wharf migrate`.
pub async fn migrate(config: &Config) -> anyhow::Result<()> {
    let db = Database::open(
        config,
        Open {
            migrate: true,
            connections_max: 2,
            wait: Wait::ONCE,
        },
    )
    .await?;
    if db.applied.is_empty() {
        println!(
            "schema up to date ({} migrations); nothing to apply",
            db.schema_migrations
        );
    } else {
        println!(
            "applied {} migration(s): {}; schema up to date ({} migrations)",
            db.applied.len(),
            db.applied.join(", "),
            db.schema_migrations
        );
    }
    db.close().await
}

/// Bucket bounds, in seconds, of every latency histogram (`*_seconds`): from half a
/// millisecond (a claim on an idle database) to two minutes (the longest provider call a kind
/// may allow is well inside it), about three buckets a decade, so a p99 is read within a factor
/// of about two and a half anywhere in that range. Histograms, unlike the exporter's default
/// summaries, add up across replicas.
pub const LATENCY_BUCKETS_SECONDS: [f64; 18] = [
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 90.0, 120.0,
];

fn install_prometheus() -> anyhow::Result<PrometheusHandle> {
    prometheus_builder()?
        .install_recorder()
        .context("cannot install the metrics recorder")
}

/// The exporter as `serve` installs it: every `*_seconds` histogram with
/// [`LATENCY_BUCKETS_SECONDS`] (gauges and counters are not histograms, so the suffix leaves
/// them alone).
pub fn prometheus_builder() -> anyhow::Result<PrometheusBuilder> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Suffix("_seconds".to_owned()),
            &LATENCY_BUCKETS_SECONDS,
        )
        .context("invalid histogram buckets")
}
