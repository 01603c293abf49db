//! One chaos run: an ephemeral PostgreSQL cluster, the sinks, `wharf serve` and several
//! `wharf work` replicas, an outbox feeder and inbox producers, faults at random moments, then
//! a quiet drain, `wharf verify`, and the checker over everything that was recorded.
//!
//! Owns: the run's settings and fault kinds, its configuration file, the load and the evidence
//! gathering (the injectors are `faults.rs`). Must not know: the rules (the checker) or how a
//! report is printed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rand::Rng as _;
use rand::seq::SliceRandom as _;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row as _};

use crate::check::{self, ActionRow, AuditRow, Enqueued, Evidence, IdentityRow, SentEnvelope};
use crate::procs::{Launch, Replica, run_once};
use crate::sink::{self, Clock, FaultDice, Recorder, key_for};
use crate::wire::Wire;

/// The application name of the harness's own connections: the backend-kill fault spares them.
pub(crate) const HARNESS_APPLICATION: &str = "wharf-chaos";
/// The database the run uses.
const DATABASE: &str = "chaos";
/// The inbox scope of the producers.
const TENANT: &str = "chaos";
const PROJECT: &str = "p1";
/// Actions per enqueue statement.
const ENQUEUE_BATCH: usize = 100;

/// What a run does. [`Settings::small`] fits in `cargo test`; [`Settings::big`] is the run
/// RELIABILITY.md reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    /// Actions to enqueue (emails, webhooks, deduplicated webhooks: 3 : 4 : 3).
    pub actions: u64,
    /// Lanes they are spread over.
    pub lanes: u32,
    /// `wharf work` replicas (beside `wharf serve`, which runs an executor too).
    pub workers: u32,
    /// Inbox producers (one stream each).
    pub producers: u32,
    /// Envelopes each producer sends.
    pub envelopes_per_producer: u64,
    /// Faults of each process/database kind to inject at least (the run goes on until every
    /// kind reached it and the load is done).
    pub faults_per_kind: u32,
    /// Mean milliseconds between two faults of one kind.
    pub fault_interval_ms: u64,
    /// Provider faults per thousand calls: refusals (4xx / 550), temporary failures
    /// (5xx / 451), stalls past the client's timeout.
    pub provider_permille: [u64; 3],
    /// The executor's lease. SIGSTOP pauses last longer than this.
    pub lease_ms: u64,
    /// Actions in flight (enqueued, not yet called) the feeder keeps at most.
    pub backlog_max: u64,
    /// The whole run, drain included, must end by then.
    pub deadline_s: u64,
    /// Milliseconds PostgreSQL stays down in a restart: uniform in [min, max].
    pub restart_down_ms: [u64; 2],
    /// The fault kinds to inject (all four by default).
    pub kinds: Vec<FaultKind>,
    /// The executor's longest idle poll interval (`[executor] poll_interval_ms_max`); short by
    /// default so a quiet replica notices work soon, 2000 is wharf's own default.
    pub poll_interval_ms_max: u64,
}

impl Settings {
    /// A run of 30–40 s: enough of each fault to exercise every path once or twice.
    pub fn small() -> Settings {
        Settings {
            actions: 1_500,
            lanes: 60,
            workers: 3,
            producers: 3,
            envelopes_per_producer: 120,
            faults_per_kind: 3,
            fault_interval_ms: 2_500,
            provider_permille: [10, 30, 10],
            lease_ms: 8_000,
            backlog_max: 600,
            deadline_s: 170,
            restart_down_ms: [200, 1_500],
            kinds: FaultKind::ALL.to_vec(),
            poll_interval_ms_max: 500,
        }
    }

    /// The RELIABILITY.md run: 100,000 actions, at least 100 faults of each kind.
    pub fn big() -> Settings {
        Settings {
            actions: 100_000,
            lanes: 600,
            workers: 4,
            producers: 8,
            envelopes_per_producer: 2_500,
            faults_per_kind: 100,
            fault_interval_ms: 3_000,
            provider_permille: [5, 20, 5],
            lease_ms: 8_000,
            backlog_max: 4_000,
            deadline_s: 4 * 3_600,
            restart_down_ms: [200, 2_000],
            kinds: FaultKind::ALL.to_vec(),
            poll_interval_ms_max: 500,
        }
    }
}

/// A fault the harness injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// kill -9 of a replica, then a restart.
    Kill,
    /// SIGSTOP of a worker past its lease, then SIGCONT.
    Pause,
    /// `pg_terminate_backend` of about half of wharf's connections.
    TerminateBackends,
    /// PostgreSQL `stop -m immediate`, down a while, started again (crash recovery).
    PostgresRestart,
    /// An extra replica that dies at its first attempt whose claim committed, before the
    /// adapter starts (the named point `after_claim`).
    AfterClaim,
    /// An extra replica that dies right after a fence passed, before the provider call
    /// (`after_fence`).
    AfterFence,
    /// An extra replica that dies after the provider answered, before the result is recorded
    /// (`after_answer`).
    AfterAnswer,
    /// The wires between the replicas and both providers are cut for a while: open connections
    /// are reset, new ones refused with a reset (`wire.rs`).
    NetworkCut,
    /// SIGTERM of a random replica (`serve` included): a graceful shutdown in the middle of the
    /// load, then a restart. It must exit cleanly and lose nothing.
    Sigterm,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::Kill,
        FaultKind::Pause,
        FaultKind::TerminateBackends,
        FaultKind::PostgresRestart,
        FaultKind::AfterClaim,
        FaultKind::AfterFence,
        FaultKind::AfterAnswer,
        FaultKind::NetworkCut,
        FaultKind::Sigterm,
    ];

    /// The `WHARF_FAIL_POINT` a named-point kind arms.
    pub(crate) fn fail_point(self) -> Option<&'static str> {
        match self {
            FaultKind::AfterClaim => Some("after_claim"),
            FaultKind::AfterFence => Some("after_fence"),
            FaultKind::AfterAnswer => Some("after_answer"),
            _ => None,
        }
    }
}

/// One injected fault.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultEvent {
    /// Its kind.
    pub kind: FaultKind,
    /// When it began, run microseconds.
    pub at_us: i64,
    /// When it was over (the process restarted, resumed, the database answered again).
    pub over_us: i64,
    /// What it hit (a replica's name, how many backends).
    pub target: String,
}

/// The database's view of the outbox at one moment (sampled every second during the load).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    /// When, run microseconds.
    pub at_us: i64,
    /// Actions EXECUTING.
    pub executing: i64,
    /// Of those, how many have a lease that expired (waiting to be reclaimed).
    pub expired: i64,
    /// How long ago the oldest of those leases expired, milliseconds.
    pub expired_for_ms: i64,
}

/// What a run produced.
#[derive(Debug, Serialize, Deserialize)]
pub struct Outcome {
    /// The settings it ran with.
    pub settings: Settings,
    /// Everything the checker looked at.
    pub evidence: Evidence,
    /// The faults, in order.
    pub faults: Vec<FaultEvent>,
    /// Provider faults answered, by kind (`http_4xx`, `http_5xx`, `http_timeout`,
    /// `smtp_550`, `smtp_451`, `smtp_timeout`).
    pub provider_faults: BTreeMap<String, u64>,
    /// What the checker found.
    pub violations: Vec<check::Violation>,
    /// Seconds under load (faults on), and of the final drain.
    pub load_s: f64,
    /// Seconds of the final drain.
    pub drain_s: f64,
    /// Replicas that exited without being told to (a crash of wharf itself).
    pub unexpected_exits: Vec<String>,
    /// The outbox every second.
    pub samples: Vec<Sample>,
    /// The run's directory (logs), when kept.
    pub dir: Option<PathBuf>,
}

pub(crate) struct Shared {
    pub(crate) clock: Clock,
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) replicas: Mutex<Vec<Replica>>,
    pub(crate) faults: Mutex<Vec<FaultEvent>>,
    /// The load (outbox feeder and producers) is done.
    pub(crate) load_done: AtomicBool,
    /// Faults stop.
    pub(crate) quiet: AtomicBool,
    pub(crate) enqueued: AtomicU64,
    pub(crate) cluster: wharf_pg::Cluster,
    /// How a replica is started (for the fail-point replicas).
    pub(crate) launch: Launch,
    /// The wires to the webhook receiver and to the SMTP relay.
    pub(crate) wires: [Wire; 2],
    pub(crate) settings: Settings,
    pub(crate) unexpected_exits: Mutex<Vec<String>>,
    pub(crate) samples: Mutex<Vec<Sample>>,
}

impl Shared {
    pub(crate) fn count(&self, kind: FaultKind) -> u32 {
        let faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        faults.iter().filter(|f| f.kind == kind).count() as u32
    }

    pub(crate) fn record(&self, kind: FaultKind, at_us: i64, target: String) {
        let over_us = self.clock.now_us();
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(FaultEvent {
                kind,
                at_us,
                over_us,
                target,
            });
    }
}

fn harness_options(cluster: &wharf_pg::Cluster) -> anyhow::Result<PgConnectOptions> {
    Ok(cluster
        .url(DATABASE)
        .parse::<PgConnectOptions>()?
        .application_name(HARNESS_APPLICATION))
}

/// Runs once with `settings`, the `wharf` binary at `wharf`; keeps the run's directory (logs,
/// the sinks' logs and the evidence as JSON) under `keep` when given.
pub async fn run(
    settings: Settings,
    wharf: PathBuf,
    keep: Option<PathBuf>,
) -> anyhow::Result<Outcome> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let temp = tempfile::Builder::new().prefix("wharf-chaos-").tempdir()?;
    let dir = match &keep {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.clone()
        }
        None => temp.path().to_owned(),
    };
    let started = Instant::now();
    let clock = Clock::start();

    // One cluster of our own, so the database can be crashed. Not the testkit's shortcuts:
    // with `synchronous_commit = off` an immediate stop loses commits that were acknowledged,
    // which would be a fault of the test, not of wharf. fsync stays off (the machine does not
    // crash, only PostgreSQL does).
    let pg_dir = dir.join("pg");
    let options = wharf_pg::Options {
        dir: pg_dir,
        ephemeral: true,
        settings: [
            ("fsync", "off"),
            ("synchronous_commit", "on"),
            ("full_page_writes", "off"),
            ("max_connections", "400"),
            ("shared_buffers", "128MB"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    };
    let cluster = tokio::task::spawn_blocking(move || wharf_pg::Cluster::start(&options))
        .await?
        .context("cannot start PostgreSQL")?;
    {
        let admin_url = cluster.url("postgres");
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&admin_url)
            .await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {DATABASE}")))
            .execute(&admin)
            .await?;
        admin.close().await;
    }
    let pool = PgPoolOptions::new()
        .max_connections(6)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(harness_options(&cluster)?)
        .await?;
    wharf::migrate::run(&pool).await?;

    let recorder = Recorder::new(clock);
    let [refuse, tempfail, timeout] = settings.provider_permille;
    let http = sink::http_sink(
        recorder.clone(),
        Arc::new(FaultDice::new(refuse, tempfail, timeout)),
    )
    .await?;
    let smtp = sink::smtp_sink(
        recorder.clone(),
        Arc::new(FaultDice::new(refuse, tempfail, timeout)),
    )
    .await?;

    // The replicas reach the providers only through the wires, which the network cut cuts.
    let http_wire = Wire::start(http.base.trim_start_matches("http://").to_owned()).await?;
    let smtp_wire = Wire::start(format!("127.0.0.1:{}", smtp.port)).await?;
    let provider_base = format!("http://127.0.0.1:{}", http_wire.port);

    let serve_port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let config = dir.join("wharf.toml");
    std::fs::write(
        &config,
        config_file(&settings, &provider_base, smtp_wire.port),
    )?;
    let launch = Launch {
        wharf: wharf.clone(),
        config,
        database_url: cluster.url(DATABASE),
        dir: dir.clone(),
    };

    // The inbox scope and one credential per producer.
    wharf::inbox::create_tenant(&pool, TENANT).await?;
    let key = wharf::inbox::generate_key(
        &pool,
        TENANT,
        PROJECT,
        Some("k1"),
        Duration::from_secs(30 * 86_400),
    )
    .await?;
    let mut credentials = Vec::new();
    for i in 1..=settings.producers {
        let device = format!("dev-{i}");
        let issued = wharf::inbox::issue_credential(&pool, TENANT, "acct", Some(&device)).await?;
        credentials.push((device, issued.token));
    }

    let listen = format!("127.0.0.1:{serve_port}");
    let mut replicas = vec![Replica::start(
        "serve",
        &launch,
        &["serve", "--listen", &listen],
    )?];
    for i in 1..=settings.workers {
        replicas.push(Replica::start(&format!("work-{i}"), &launch, &["work"])?);
    }
    let base = format!("http://{listen}");
    wait_ready(&base).await?;

    let shared = Arc::new(Shared {
        clock,
        recorder: recorder.clone(),
        replicas: Mutex::new(replicas),
        faults: Mutex::new(Vec::new()),
        load_done: AtomicBool::new(false),
        quiet: AtomicBool::new(false),
        enqueued: AtomicU64::new(0),
        cluster,
        launch: launch.clone(),
        wires: [http_wire, smtp_wire],
        settings: settings.clone(),
        unexpected_exits: Mutex::new(Vec::new()),
        samples: Mutex::new(Vec::new()),
    });
    let deadline = started + Duration::from_secs(settings.deadline_s);

    let mut faulters = Vec::new();
    for kind in settings.kinds.clone() {
        faulters.push(tokio::spawn(crate::faults::inject(
            shared.clone(),
            pool.clone(),
            kind,
        )));
    }
    let watcher = tokio::spawn(watch(shared.clone()));
    let sampler = tokio::spawn(sample(shared.clone(), pool.clone()));
    let feeder = tokio::spawn(feed(shared.clone(), pool.clone(), provider_base.clone()));
    let mut producers = Vec::new();
    for (device, token) in credentials {
        producers.push(tokio::spawn(produce(
            shared.clone(),
            base.clone(),
            device,
            token,
            key.private_seed,
            deadline,
        )));
    }

    let enqueued = feeder.await.context("the feeder panicked")??;
    let mut sent = Vec::new();
    for producer in producers {
        sent.extend(producer.await.context("a producer panicked")?);
    }
    shared.load_done.store(true, Ordering::SeqCst);
    for faulter in faulters {
        faulter.await.context("a fault injector panicked")?;
    }
    let load_s = started.elapsed().as_secs_f64();

    // Quiet: every replica runs, every provider answers; wait for every action to end.
    http.dice.enabled.store(false, Ordering::SeqCst);
    smtp.dice.enabled.store(false, Ordering::SeqCst);
    {
        let mut replicas = shared.replicas.lock().unwrap_or_else(|e| e.into_inner());
        for replica in replicas.iter_mut() {
            replica.resume();
        }
    }
    let drain_started = Instant::now();
    settle(&shared, &pool, &launch, deadline).await?;
    let drain_s = drain_started.elapsed().as_secs_f64();
    shared.quiet.store(true, Ordering::SeqCst);
    watcher.abort();
    sampler.abort();
    {
        let mut replicas = shared.replicas.lock().unwrap_or_else(|e| e.into_inner());
        for replica in replicas.iter_mut() {
            replica.stop();
        }
    }

    let verify_failures = verify(&launch).await;
    let evidence = Evidence {
        effects: recorder.effects(),
        enqueued,
        actions: action_rows(&pool).await?,
        verify_failures,
        sent,
        identities: identity_rows(&pool).await?,
        cursors: cursors(&pool).await?,
        audit: audit_rows(&pool).await?,
    };
    pool.close().await;
    let violations = check::check(&evidence);
    let faults = shared
        .faults
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let unexpected_exits = shared
        .unexpected_exits
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let samples = shared
        .samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let outcome = Outcome {
        settings,
        samples,
        provider_faults: provider_faults(&evidence),
        evidence,
        faults,
        violations,
        load_s,
        drain_s,
        unexpected_exits,
        dir: keep,
    };
    if let Some(dir) = &outcome.dir {
        std::fs::write(
            dir.join("outcome.json"),
            serde_json::to_vec(&outcome).unwrap_or_default(),
        )?;
    }
    Ok(outcome)
}

/// The run's `wharf.toml`: short leases and timeouts so that pauses past the lease and
/// stalls past the timeouts fit in a run, loopback allowed, the limiters out of the way.
fn config_file(settings: &Settings, http_base: &str, smtp_port: u16) -> String {
    // The fence margin must exceed every kind's call timeout (email's is at least 5 s).
    let margin = 6_000.min(settings.lease_ms - 1_000);
    format!(
        r#"log_format = "json"

[executor]
lease_ms = {lease}
fence_margin_ms = {margin}
concurrency_max = 32
poll_interval_ms_max = {poll}
shutdown_grace_ms = 2000

[email]
relay_host = "127.0.0.1"
relay_port = {smtp_port}
tls = "none"
connect_timeout_ms = 1000
command_timeout_ms = 1000
data_timeout_ms = 2000
call_timeout_ms = 5000
from = "chaos <chaos@chaos.test>"
message_id_domain = "chaos.test"

[http]
allow_cidrs = ["127.0.0.0/8"]
dedupe_endpoints = ["{http_base}/dedupe"]
connect_timeout_ms = 1000
total_timeout_ms = 2000

[inbox]
peer_rate_per_s = 1000000.0
peer_burst = 1000000
identity_rate_per_s = 1000000.0
identity_burst = 1000000

[startup]
deadline_ms = 900000
"#,
        lease = settings.lease_ms,
        poll = settings.poll_interval_ms_max,
    )
}

async fn wait_ready(base: &str) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let started = Instant::now();
    loop {
        if let Ok(response) = client.get(format!("{base}/readyz")).send().await
            && response.status() == 200
        {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("wharf serve was not ready in 120 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Notices replicas that exited on their own and starts them again (a crash of wharf is a
/// finding, not a reason to stop the run).
async fn watch(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut replicas = shared.replicas.lock().unwrap_or_else(|e| e.into_inner());
        for replica in replicas.iter_mut() {
            if replica.terminating {
                continue;
            }
            if let Some(status) = replica.exited() {
                shared
                    .unexpected_exits
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(format!("{} exited with {status}", replica.name));
                let _ = replica.kill_and_restart();
            }
        }
    }
}

/// Every second: how many actions are EXECUTING, and how many of those hold a lease that
/// already expired (the database clock), the oldest for how long. A reclaim is due at once
/// (SPEC §2.3); what this sees is how late it comes.
async fn sample(shared: Arc<Shared>, pool: PgPool) {
    for second in 1u64.. {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if second % 30 == 0 {
            let faults: Vec<u32> = FaultKind::ALL.iter().map(|&k| shared.count(k)).collect();
            eprintln!(
                "wharf-chaos: {second} s: {} enqueued, {} calls finished, faults \
                 kill/pause/terminate/restart/after_claim/after_fence/after_answer/cut/sigterm {faults:?}",
                shared.enqueued.load(Ordering::Relaxed),
                shared.recorder.finished.load(Ordering::Relaxed),
            );
        }
        let row = sqlx::query(
            "SELECT count(*),
                    count(*) FILTER (WHERE lease_expires_at < now()),
                    COALESCE(EXTRACT(EPOCH FROM now() - min(lease_expires_at)
                             FILTER (WHERE lease_expires_at < now())) * 1000, 0)::bigint
               FROM wharf.action WHERE state = 'EXECUTING'",
        )
        .fetch_one(&pool)
        .await;
        if let Ok(row) = row {
            let sample = Sample {
                at_us: shared.clock.now_us(),
                executing: row.get(0),
                expired: row.get(1),
                expired_for_ms: row.get(2),
            };
            shared
                .samples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(sample);
        }
    }
}

/// Actions not ended yet, or `None` while the database does not answer.
async fn unended(pool: &PgPool) -> Option<u64> {
    sqlx::query_scalar::<_, i64>(
        "SELECT count(*) FROM wharf.action
          WHERE state NOT IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')",
    )
    .fetch_one(pool)
    .await
    .ok()
    .map(|n| n as u64)
}

/// The lanes: emails (at-most-once), webhooks to a receiver that does not deduplicate, and
/// webhooks to one that does, 3 : 4 : 3.
fn lanes(count: u32) -> Vec<String> {
    (0..count)
        .map(|i| match i % 10 {
            0..=2 => format!("mail-{i}"),
            3..=6 => format!("hook-{i}"),
            _ => format!("dhook-{i}"),
        })
        .collect()
}

fn request(lane: &str, sequence: u64, http_base: &str) -> wharf::outbox::ActionRequest {
    let key = key_for(lane, sequence);
    if lane.starts_with("mail") {
        let payload = json!({"notice": "message", "event": {
            "to": format!("{key}@chaos.test"), "subject": format!("chaos {key}"), "text": "x"}});
        let mut request = wharf::outbox::ActionRequest::new("email", lane, key, payload);
        request.max_attempts = Some(4);
        request
    } else {
        let path = if lane.starts_with("dhook") {
            "dedupe"
        } else {
            "hook"
        };
        let payload = json!({"url": format!("{http_base}/{path}/{lane}"),
                             "body": {"lane": lane, "sequence": sequence}});
        let mut request = wharf::outbox::ActionRequest::new("webhook", lane, key, payload);
        request.tenant_id = Some(TENANT.to_owned());
        request.max_attempts = Some(5);
        request
    }
}

/// A registry with the same kinds the binary runs, for enqueue-time checks.
fn registry(http_base: &str) -> anyhow::Result<wharf::outbox::Registry> {
    use wharf_adapters::email::{EmailAdapter, EmailConfig, MessageNotice};
    use wharf_adapters::http::{
        HttpSenderConfig, InMemoryWebhookSigner, NetworkSender, WebhookAdapter,
    };
    let mut registry = wharf::outbox::Registry::new();
    let email = EmailConfig {
        relay_host: Some("127.0.0.1".into()),
        relay_port: Some(25),
        ..EmailConfig::default()
    };
    let email = EmailAdapter::builder()
        .config(email)
        .notice(Arc::new(MessageNotice))
        .build()?;
    registry.register(Arc::new(email))?;
    let http = HttpSenderConfig {
        allow_cidrs: vec!["127.0.0.0/8".into()],
        dedupe_endpoints: vec![format!("{http_base}/dedupe")],
        ..HttpSenderConfig::default()
    };
    let signer = InMemoryWebhookSigner::new(ed25519_dalek_key());
    registry.register(Arc::new(WebhookAdapter::new(
        NetworkSender::new(&http)?,
        Arc::new(signer),
    )))?;
    Ok(registry)
}

fn ed25519_dalek_key() -> ed25519_dalek::SigningKey {
    let mut seed = [0u8; 32];
    rand::thread_rng().fill(&mut seed);
    ed25519_dalek::SigningKey::from_bytes(&seed)
}

/// The outbox load: every action once, in batches over random lanes, each batch retried
/// until the database acknowledges it (same keys: a retry after an unknown outcome returns
/// the actions it made). Batches go one at a time, so a lane's ids follow its sequence.
async fn feed(
    shared: Arc<Shared>,
    pool: PgPool,
    http_base: String,
) -> anyhow::Result<Vec<Enqueued>> {
    let registry = registry(&http_base)?;
    let lanes = lanes(shared.settings.lanes);
    let mut next = vec![1u64; lanes.len()];
    let mut out = Vec::with_capacity(shared.settings.actions as usize);
    while (out.len() as u64) < shared.settings.actions {
        // Calls the sinks finished are a cheap lower bound of the work done; but an action can
        // end without a call (a replica that died at its fence, a refusal before the call), so
        // at the limit the database says how many are still unended.
        let in_flight = out.len() as u64 - shared.recorder.finished.load(Ordering::Relaxed);
        if in_flight >= shared.settings.backlog_max
            && unended(&pool)
                .await
                .is_none_or(|n| n >= shared.settings.backlog_max)
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let room = (shared.settings.actions - out.len() as u64) as usize;
        let mut batch = Vec::new();
        let mut records = Vec::new();
        for _ in 0..ENQUEUE_BATCH.min(room) {
            let lane = rand::thread_rng().gen_range(0..lanes.len());
            let name = &lanes[lane];
            batch.push(request(name, next[lane], &http_base));
            records.push(Enqueued {
                key: key_for(name, next[lane]),
                at_most_once: name.starts_with("mail"),
                dedupe: name.starts_with("dhook"),
                enqueued_us: 0,
            });
            next[lane] += 1;
        }
        loop {
            let attempt = async {
                let mut conn = pool.acquire().await?;
                wharf::outbox::enqueue_many(&mut conn, &registry, batch.clone())
                    .await
                    .map_err(anyhow::Error::from)
            };
            match attempt.await {
                Ok(_) => break,
                Err(e)
                    if e.downcast_ref::<wharf::outbox::Error>()
                        .is_some_and(|e| matches!(e, wharf::outbox::Error::Invalid { .. })) =>
                {
                    bail!("the harness built an invalid request: {e:#}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        shared
            .enqueued
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        let now = shared.clock.now_us();
        out.extend(records.into_iter().map(|r| Enqueued {
            enqueued_us: now,
            ..r
        }));
    }
    Ok(out)
}

/// One inbox producer: its whole stream built and signed up front, sent in an order shuffled
/// within windows of 16 (gaps, then fills), every envelope retried until the server decides;
/// now and then an envelope already acknowledged is sent again (a retry after a lost answer).
async fn produce(
    shared: Arc<Shared>,
    base: String,
    device: String,
    token: String,
    seed: [u8; 32],
    deadline: Instant,
) -> Vec<SentEnvelope> {
    let mut config = wharf_client::ProducerConfig::new(base, TENANT, PROJECT, token, "k1", seed);
    config.request_timeout = Duration::from_secs(10);
    let producer = match wharf_client::Producer::new(config, 1) {
        Ok(producer) => producer,
        Err(e) => panic!("producer {device}: {e}"),
    };
    let count = shared.settings.envelopes_per_producer;
    let mut envelopes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let payload = json!({"producer_id": device, "acknowledged_sequence": 0,
                             "acknowledged_event_id": null, "version": 1});
        match producer.envelope("sync_cursor", payload, None) {
            Ok(envelope) => envelopes.push(envelope),
            Err(e) => panic!("producer {device}: {e}"),
        }
    }
    let mut order: Vec<usize> = (0..envelopes.len()).collect();
    for window in order.chunks_mut(16) {
        window.shuffle(&mut rand::thread_rng());
    }
    let mut sent: Vec<SentEnvelope> = envelopes
        .iter()
        .map(|e| SentEnvelope {
            producer: device.clone(),
            sequence: e.producer_sequence,
            event_id: e.event_id.clone(),
            outcome: None,
        })
        .collect();
    let mut done = Vec::new();
    for i in order {
        sent[i].outcome = send_until_decided(&producer, &envelopes[i], deadline).await;
        done.push(i);
        if rand::thread_rng().gen_range(0..20) == 0 {
            let j = done[rand::thread_rng().gen_range(0..done.len())];
            if let Some(outcome) = send_until_decided(&producer, &envelopes[j], deadline).await {
                sent[j].outcome = Some(outcome);
            }
        }
    }
    sent
}

async fn send_until_decided(
    producer: &wharf_client::Producer,
    envelope: &wharf_core::envelope::Envelope,
    deadline: Instant,
) -> Option<String> {
    while Instant::now() < deadline {
        match producer.send(envelope).await {
            Ok(answer) => return Some(answer.outcome.as_str().to_owned()),
            Err(wharf_client::ClientError::Refused { status, code, .. }) => {
                return Some(format!("http-{status}-{code}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
    None
}

/// Waits until every action ended: replicas run, providers answer; after a while without
/// progress, `wharf drain` makes retries that wait for their backoff due at once.
async fn settle(
    shared: &Shared,
    pool: &PgPool,
    launch: &Launch,
    deadline: Instant,
) -> anyhow::Result<()> {
    let mut last = i64::MAX;
    let mut still = 0;
    loop {
        let open: Result<i64, _> = sqlx::query_scalar(
            "SELECT count(*) FROM wharf.action
              WHERE state NOT IN ('DONE', 'UNCERTAIN', 'FAILED', 'CANCELLED')",
        )
        .fetch_one(pool)
        .await;
        if let Ok(open) = open {
            if open == 0 && shared.enqueued.load(Ordering::Relaxed) > 0 {
                return Ok(());
            }
            if open < last {
                still = 0;
            } else {
                still += 1;
            }
            last = open;
        }
        if still >= 5 {
            // Everything left waits for a backoff (or a lease): make it due.
            let launch = launch.clone();
            let _ = tokio::task::spawn_blocking(move || {
                run_once(&launch, &["drain"], Duration::from_secs(120))
            })
            .await;
            still = 0;
        }
        if Instant::now() > deadline {
            return Ok(()); // the checker reports what did not end
        }
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
}

/// `wharf verify --json`: the names of failing checks, empty when clean.
async fn verify(launch: &Launch) -> Vec<String> {
    let launch = launch.clone();
    let ran = tokio::task::spawn_blocking(move || {
        run_once(&launch, &["verify", "--json"], Duration::from_secs(120))
    })
    .await;
    let (ok, text) = match ran {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => return vec![format!("wharf verify did not run: {e:#}")],
        Err(e) => return vec![format!("wharf verify did not run: {e}")],
    };
    let report: serde_json::Value = match serde_json::from_str(text.trim()) {
        Ok(report) => report,
        Err(_) => return vec![format!("wharf verify printed no report: {text}")],
    };
    let mut failing: Vec<String> = report["checks"]
        .as_array()
        .map(|checks| {
            checks
                .iter()
                .filter(|c| c["violations"].as_u64().unwrap_or(1) > 0)
                .map(|c| c["name"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default();
    if failing.is_empty() && (!ok || report["ok"] != serde_json::Value::Bool(true)) {
        failing.push("wharf verify failed".to_owned());
    }
    failing
}

async fn action_rows(pool: &PgPool) -> anyhow::Result<Vec<ActionRow>> {
    let rows = sqlx::query(
        "SELECT id, idempotency_key, lane_key, state, stop_reason, error_code, attempt
           FROM wharf.action ORDER BY id",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| ActionRow {
            id: r.get(0),
            key: r.get(1),
            lane: r.get(2),
            state: r.get(3),
            stop_reason: r.get(4),
            error_code: r.get(5),
            attempt: r.get(6),
        })
        .collect())
}

async fn identity_rows(pool: &PgPool) -> anyhow::Result<Vec<IdentityRow>> {
    let rows = sqlx::query(
        "SELECT s.producer_id::text, i.producer_sequence::bigint, i.event_id
           FROM wharf.inbox_identities i JOIN wharf.inbox_streams s USING (stream_id)",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| IdentityRow {
            producer: r.get(0),
            sequence: r.get::<i64, _>(1) as u64,
            event_id: r.get(2),
        })
        .collect())
}

async fn cursors(pool: &PgPool) -> anyhow::Result<BTreeMap<String, u64>> {
    let rows = sqlx::query(
        "SELECT producer_id::text, acknowledged_sequence::bigint FROM wharf.inbox_streams",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.get(0), r.get::<i64, _>(1) as u64))
        .collect())
}

async fn audit_rows(pool: &PgPool) -> anyhow::Result<Vec<AuditRow>> {
    let rows = sqlx::query(
        "SELECT producer_id, event_id_sha256, outcome FROM wharf.inbox_audit
          WHERE action = 'ingest' AND producer_id IS NOT NULL AND event_id_sha256 IS NOT NULL",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| AuditRow {
            producer: r.get(0),
            event_id_sha256: r.get(1),
            outcome: r.get(2),
        })
        .collect())
}

fn provider_faults(evidence: &Evidence) -> BTreeMap<String, u64> {
    use crate::sink::{Answer, Channel};
    let mut out = BTreeMap::new();
    for effect in &evidence.effects {
        let name = match (effect.channel, effect.answer) {
            (_, Answer::Delivered) => continue,
            (Channel::Http, Answer::Refused) => "http_4xx",
            (Channel::Http, Answer::TempFailed) => "http_5xx",
            (Channel::Http, Answer::TimedOut) => "http_timeout",
            (Channel::Smtp, Answer::Refused) => "smtp_550",
            (Channel::Smtp, Answer::TempFailed) => "smtp_451",
            (Channel::Smtp, Answer::TimedOut) => "smtp_timeout",
        };
        *out.entry(name.to_owned()).or_insert(0) += 1;
    }
    out
}
