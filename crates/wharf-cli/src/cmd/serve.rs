//! `wharf serve`, `wharf work` and `wharf migrate`: composition of the server and the executor.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::compose;
use crate::config::Config;
use crate::db::{Database, Open};
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
    /// Serve HTTP only; run no executor in this process.
    #[arg(long)]
    no_executor: bool,
}

/// `wharf work` options.
#[derive(Debug, clap::Args)]
pub struct WorkArgs {}

/// The `[serve]` table of the configuration file.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ServeSection {
    listen: Option<SocketAddr>,
    operator_token: Option<String>,
}

/// `wharf serve`.
pub async fn serve(config: &Config, args: ServeArgs) -> anyhow::Result<()> {
    let section: ServeSection = config.section("serve")?;
    let listen = args
        .listen
        .or(section.listen)
        .unwrap_or_else(|| LISTEN_DEFAULT.parse().expect("the default address parses"));
    let prometheus = install_prometheus()?;
    let registry = Arc::new(compose::registry(config)?);
    let db = Database::open(
        config,
        Open {
            migrate: true,
            connections_max: pool_size(config)?,
        },
    )
    .await?;
    let executor = compose::executor(config, db.pool.clone(), registry.clone())?;
    let operator_token =
        wharf_http::auth::OperatorToken::new(args.operator_token.or(section.operator_token));
    let inbox_settings: wharf::inbox::InboxSettings = config.section("inbox")?;
    let inbox = Arc::new(wharf::inbox::Inbox::new(
        db.pool.clone(),
        inbox_settings
            .into_config()
            .context("invalid [inbox] configuration")?,
    ));

    let routers = vec![
        wharf_http::health::routes(db.pool.clone(), Some(prometheus)),
        wharf_http::openapi::routes(),
        wharf_http::actions::routes(db.pool.clone(), registry.clone(), operator_token.clone()),
        wharf_http::dead_letters::routes(db.pool.clone(), operator_token.clone()),
        wharf_http::ingest::routes(inbox),
        wharf_http::webhook_keys::routes(
            super::webhook_key::public_keys(config)?,
            operator_token.clone(),
        ),
        // Route modules are added above this line, one entry each.
    ];
    let app = wharf_http::app(routers);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    tracing::info!(address = %listener.local_addr()?, "wharf serving");

    let stop = Stop::on_signal();
    let http = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(stop.clone().wait());
    let work = async {
        if args.no_executor {
            stop.clone().wait().await;
            return Ok(());
        }
        let worked = executor.run(stop.clone().wait()).await;
        if worked.is_err() {
            // A server that takes actions but never runs them is worse than none: stop
            // serving too, and exit non-zero.
            stop.trigger();
        }
        worked
    };
    let (served, worked) = tokio::join!(http, work);
    let closed = db.close().await;
    served.context("the HTTP server failed")?;
    worked.context("the executor failed")?;
    closed
}

/// `wharf work`.
pub async fn work(config: &Config, _args: WorkArgs) -> anyhow::Result<()> {
    let registry = Arc::new(compose::registry(config)?);
    let db = Database::open(
        config,
        Open {
            migrate: true,
            connections_max: pool_size(config)?,
        },
    )
    .await?;
    let executor = compose::executor(config, db.pool.clone(), registry)?;
    tracing::info!("wharf working");
    let worked = executor.run(Stop::on_signal().wait()).await;
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
        },
    )
    .await?;
    println!("schema up to date");
    db.close().await
}

fn install_prometheus() -> anyhow::Result<PrometheusHandle> {
    PrometheusBuilder::new()
        .install_recorder()
        .context("cannot install the metrics recorder")
}
