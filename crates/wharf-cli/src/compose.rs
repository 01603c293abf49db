//! Composition: the registry of kinds and the executor, built from configuration. The one
//! place that decides which adapters a `wharf` process runs.

use std::sync::Arc;

use anyhow::Context;
use wharf::outbox::{Executor, ExecutorConfig, Registry};
use wharf_adapters::email::{EmailAdapter, EmailConfig, MessageNotice};

use crate::config::Config;

/// The `[executor]` table: every key optional, defaults from [`ExecutorConfig::default`].
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecutorSection {
    claim_batch_max: Option<u32>,
    concurrency_max: Option<u32>,
    per_kind_concurrency_max: Option<u32>,
    lease_ms: Option<u64>,
    fence_margin_ms: Option<u64>,
    poll_interval_ms_min: Option<u64>,
    poll_interval_ms_max: Option<u64>,
    notify: Option<bool>,
    shutdown_grace_ms: Option<u64>,
    retention_ms: Option<u64>,
}

/// The executor settings: the `[executor]` table over the defaults.
pub fn executor_config(config: &Config) -> anyhow::Result<ExecutorConfig> {
    let section: ExecutorSection = config.section("executor")?;
    let mut out = ExecutorConfig::default();
    macro_rules! set {
        ($($field:ident),*) => { $( if let Some(v) = section.$field { out.$field = v; } )* };
    }
    set!(
        claim_batch_max,
        concurrency_max,
        per_kind_concurrency_max,
        lease_ms,
        fence_margin_ms,
        poll_interval_ms_min,
        poll_interval_ms_max,
        notify,
        shutdown_grace_ms,
        retention_ms
    );
    Ok(out)
}

/// Every kind this process can enqueue and run, with its adapter:
///
/// - `email`: SMTP through the `[email]` relay, or `.eml` files under `<data-dir>/mail` when no
///   relay is configured (the embedded default), with the built-in `message` notice.
pub fn registry(config: &Config) -> anyhow::Result<Registry> {
    let mut registry = Registry::new();
    let email_config: EmailConfig = config.section("email")?;
    let email = EmailAdapter::builder()
        .config(email_config)
        .mail_dir(config.data_dir.join("mail"))
        .notice(Arc::new(MessageNotice))
        .build()
        .context("invalid [email] configuration")?;
    registry.register(Arc::new(email))?;
    Ok(registry)
}

/// An executor over `pool` for every registered kind, its settings validated.
pub fn executor(
    config: &Config,
    pool: sqlx::PgPool,
    registry: Arc<Registry>,
) -> anyhow::Result<Executor> {
    let executor_config = executor_config(config)?;
    Executor::new(pool, registry, executor_config).context("invalid [executor] configuration")
}
