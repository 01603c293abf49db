//! Composition: the registry of kinds and the executor, built from configuration. The one
//! place that decides which adapters a `wharf` process runs.

use std::sync::Arc;

use anyhow::Context;
use wharf::inbox::LimitPolicy;
use wharf::outbound::DeliveryBudget;
use wharf::outbox::{Executor, ExecutorConfig, Registry};
use wharf_adapters::email::{EmailAdapter, EmailConfig, MessageNotice};
use wharf_adapters::http::{
    EnvelopeAdapter, EnvelopeConfig, HttpSenderConfig, InMemoryWebhookSigner, NetworkSender,
    WebhookAdapter,
};

use crate::config::Config;

/// The `[executor]` table: every key optional, defaults from [`ExecutorConfig::default`].
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecutorSection {
    claim_batch_max: Option<u32>,
    concurrency_max: Option<u32>,
    per_kind_concurrency_max: Option<u32>,
    claim_ahead_max: Option<u32>,
    lease_ms: Option<u64>,
    fence_margin_ms: Option<u64>,
    poll_interval_ms_min: Option<u64>,
    poll_interval_ms_max: Option<u64>,
    notify: Option<bool>,
    shutdown_grace_ms: Option<u64>,
    retention_ms: Option<u64>,
    /// 1..=4, default 1 (see `ExecutorConfig::claims_in_flight_max`).
    claims_in_flight_max: Option<u32>,
    /// Default true (see `ExecutorConfig::vacuum_live`): false leaves the live table to
    /// autovacuum, for a role that should not vacuum or an operator who tunes it.
    vacuum_live: Option<bool>,
    /// 100..=1e9, default 100,000 (see `ExecutorConfig::vacuum_dead_rows_min`).
    vacuum_dead_rows_min: Option<u64>,
    /// 0..=1000, default 50 (see `ExecutorConfig::vacuum_dead_per_mille`).
    vacuum_dead_per_mille: Option<u32>,
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
        claim_ahead_max,
        lease_ms,
        fence_margin_ms,
        poll_interval_ms_min,
        poll_interval_ms_max,
        notify,
        shutdown_grace_ms,
        retention_ms,
        claims_in_flight_max,
        vacuum_live,
        vacuum_dead_rows_min,
        vacuum_dead_per_mille
    );
    Ok(out)
}

/// Every kind this process can enqueue and run, with its adapter:
///
/// - `email`: SMTP through the `[email]` relay, or `.eml` files under `<data-dir>/mail` when no
///   relay is configured (the embedded default), with the built-in `message` notice.
/// - `webhook`: signed HTTP POSTs through the network sender (`[http]`), signed with the
///   `[webhook]` key.
/// - `envelope`: signed controlplane/v1 envelopes to other wharfs' ingest endpoints, with the
///   credentials of `[envelope]` and the per-tenant delivery limit of `[outbound]`.
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

    let http_config: HttpSenderConfig = config.section("http")?;
    let sender = NetworkSender::new(&http_config).context("invalid [http] configuration")?;
    let signer = InMemoryWebhookSigner::new(webhook_key(config)?);
    registry.register(Arc::new(WebhookAdapter::new(
        sender.clone(),
        Arc::new(signer),
    )))?;

    let outbound: OutboundSection = config.section("outbound")?;
    let budget = DeliveryBudget::new(
        LimitPolicy {
            rate_per_s: outbound
                .delivery_rate_per_s
                .unwrap_or(DELIVERY_RATE_PER_S_DEFAULT),
            burst: outbound.delivery_burst.unwrap_or(DELIVERY_BURST_DEFAULT),
        },
        DELIVERY_TENANTS_MAX,
    );
    // `nats://` destinations publish to JetStream; nothing connects until the first one.
    let envelope = envelope_adapter(config, sender)?
        .with_budget(Arc::new(budget))
        .with_jetstream(Arc::new(wharf_nats::Publisher::new(
            wharf_nats::PublisherConfig::default(),
        )));
    registry.register(Arc::new(envelope))?;
    Ok(registry)
}

/// The `envelope` kind's adapter with the `[[envelope.destinations]]` credentials.
pub fn envelope_adapter(config: &Config, sender: NetworkSender) -> anyhow::Result<EnvelopeAdapter> {
    let envelope_config: EnvelopeConfig = config.section("envelope")?;
    EnvelopeAdapter::new(sender, &envelope_config).context("invalid [envelope] configuration")
}

/// Refuses an envelope destination no `[[envelope.destinations]]` entry covers: without a
/// credential the delivery could only fail (`destination_credential_missing`).
pub fn check_envelope_destination(config: &Config, url: &str) -> anyhow::Result<()> {
    let http_config: HttpSenderConfig = config.section("http")?;
    let sender = NetworkSender::new(&http_config).context("invalid [http] configuration")?;
    let adapter = envelope_adapter(config, sender)?;
    if adapter.has_credential_for(url) {
        return Ok(());
    }
    let configured = adapter.destinations();
    let configured = if configured.is_empty() {
        "none is configured".to_owned()
    } else {
        format!("configured: {}", configured.join(", "))
    };
    anyhow::bail!(
        "--to {url} matches no [[envelope.destinations]] entry ({configured}); add one with the \
         receiver's URL (or a prefix of it) and the credential it issued, e.g.\n\n\
         [[envelope.destinations]]\nurl = \"{url}\"\nbearer_token_env = \"RECEIVER_TOKEN\"\n"
    )
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

/// The `[outbound]` table.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OutboundSection {
    /// The server key sealing tenant signing keys, standard base64 of 32 bytes. Every replica
    /// of one deployment needs the same one; without it, `<data-dir>/server.key` is used (and
    /// made on first use), which suits one machine and the embedded default.
    server_key: Option<String>,
    /// Envelope deliveries per second per tenant (the `delivery` limit, SPEC §3.8).
    delivery_rate_per_s: Option<f64>,
    /// Envelope deliveries a quiet tenant may send at once.
    delivery_burst: Option<u32>,
}

/// The `[webhook]` table.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookSection {
    /// The Ed25519 signing key's 32-byte seed, standard base64. Without it,
    /// `<data-dir>/webhook.key` is used (and made on first use).
    signing_key: Option<String>,
}

/// Default delivery limit per tenant: generous for one receiver, and a runaway producer still
/// cannot flood it.
const DELIVERY_RATE_PER_S_DEFAULT: f64 = 200.0;
const DELIVERY_BURST_DEFAULT: u32 = 400;
/// Tenants the delivery limiter tracks at once; the least recent are forgotten past this.
const DELIVERY_TENANTS_MAX: usize = 10_000;

/// Bytes of a key file: 44 characters of base64 and a newline, nothing bigger.
const KEY_FILE_BYTES_MAX: u64 = 128;

/// The server key: `[outbound] server_key` (or `WHARF_OUTBOUND__SERVER_KEY`), else the file
/// `<data-dir>/server.key`, created with mode 0600 when absent.
pub fn server_key(config: &Config) -> anyhow::Result<wharf::outbound::ServerKey> {
    let bytes = secret(config, OwnKey::Server)?;
    Ok(wharf::outbound::ServerKey::from_bytes(bytes))
}

/// The webhook signing key: `[webhook] signing_key`, else `<data-dir>/webhook.key`.
pub fn webhook_key(config: &Config) -> anyhow::Result<ed25519_dalek::SigningKey> {
    let seed = secret(config, OwnKey::Webhook)?;
    Ok(ed25519_dalek::SigningKey::from_bytes(&seed))
}

/// The server's own 32-byte secrets, kept outside the database (`wharf backup` carries them
/// beside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnKey {
    /// Seals the tenants' outbound signing keys (`[outbound] server_key`, `server.key`).
    Server,
    /// The Ed25519 seed that signs webhooks (`[webhook] signing_key`, `webhook.key`).
    Webhook,
}

impl OwnKey {
    /// Every key, in the order backups list them.
    pub const ALL: [OwnKey; 2] = [OwnKey::Server, OwnKey::Webhook];

    /// Its file under the data dir when the configuration does not give it.
    pub const fn file(self) -> &'static str {
        match self {
            OwnKey::Server => "server.key",
            OwnKey::Webhook => "webhook.key",
        }
    }

    /// The configuration key that gives it inline.
    pub const fn setting(self) -> &'static str {
        match self {
            OwnKey::Server => "[outbound] server_key",
            OwnKey::Webhook => "[webhook] signing_key",
        }
    }

    fn configured(self, config: &Config) -> anyhow::Result<Option<String>> {
        Ok(match self {
            OwnKey::Server => config.section::<OutboundSection>("outbound")?.server_key,
            OwnKey::Webhook => config.section::<WebhookSection>("webhook")?.signing_key,
        })
    }
}

/// Where this configuration reads one of its [`OwnKey`]s.
pub enum KeyPlace {
    /// Given inline by the configuration (file or environment): these bytes.
    Inline([u8; 32]),
    /// The file `<data-dir>/<OwnKey::file>`.
    File(std::path::PathBuf),
}

/// Where `config` reads `key`, without making it.
pub fn key_place(config: &Config, key: OwnKey) -> anyhow::Result<KeyPlace> {
    match key.configured(config)? {
        Some(text) => Ok(KeyPlace::Inline(decode_key(&text, key.setting())?)),
        None => Ok(KeyPlace::File(config.data_dir.join(key.file()))),
    }
}

/// The key in a key file; none when the file does not exist.
pub fn read_key_file(path: &std::path::Path) -> anyhow::Result<Option<[u8; 32]>> {
    match std::fs::metadata(path) {
        Ok(meta) => {
            if meta.len() > KEY_FILE_BYTES_MAX {
                anyhow::bail!("{} is too large to be a key", path.display());
            }
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            decode_key(&text, &path.display().to_string()).map(Some)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// A key file's content: standard base64 and a newline.
pub fn key_file_text(bytes: &[u8; 32]) -> String {
    use base64::Engine as _;
    format!(
        "{}\n",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

fn decode_key(text: &str, from: &str) -> anyhow::Result<[u8; 32]> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok());
    bytes.with_context(|| format!("{from} must be standard base64 of 32 bytes"))
}

/// A 32-byte secret: the configured base64 text, else the file `<data-dir>/<file>`, made with
/// fresh random bytes (mode 0600) when absent.
fn secret(config: &Config, key: OwnKey) -> anyhow::Result<[u8; 32]> {
    let path = match key_place(config, key)? {
        KeyPlace::Inline(bytes) => return Ok(bytes),
        KeyPlace::File(path) => path,
    };
    if let Some(bytes) = read_key_file(&path)? {
        return Ok(bytes);
    }
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create {}", config.data_dir.display()))?;
    let mut bytes = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
    // create_new: two processes starting at once must not each write their own key.
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(mut out) => {
            out.write_all(key_file_text(&bytes).as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
            out.sync_all()?;
            tracing::info!(path = %path.display(), "made a new key");
            Ok(bytes)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => secret(config, key),
        Err(e) => Err(e).with_context(|| format!("cannot create {}", path.display())),
    }
}
