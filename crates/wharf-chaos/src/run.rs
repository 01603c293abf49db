//! One chaos run: an ephemeral PostgreSQL cluster, the sinks, `wharf serve` and several
//! `wharf work` replicas, an outbox feeder and inbox producers, faults at random moments, then
//! a quiet drain, `wharf verify`, and the checker over everything that was recorded.
//!
//! Owns: the run's settings and fault kinds, its configuration file, the load and the evidence
//! gathering (the injectors are `faults.rs`). Must not know: the rules (the checker) or how a
//! report is printed.
//!
//! Modules: `settings` (what a run does, the fault kinds), `config` (the replicas' `wharf.toml`),
//! `load` (the outbox feeder and the inbox producers), `watch` (replicas that exit on their own,
//! the outbox sampled every second, the quiet drain at the end), `evidence` (what is read back
//! for the checker), `outcome` (what a run returns); this file runs them in order.

mod config;
mod evidence;
mod load;
mod outcome;
mod settings;
mod watch;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::check::{self, Evidence};
use crate::procs::{Launch, Replica};
use crate::sink::{self, Clock, FaultDice, Recorder};
use crate::wire::Wire;

pub use outcome::{FaultEvent, Outcome, Sample};
pub use settings::{FaultKind, Settings};

/// The application name of the harness's own connections: the backend-kill fault spares them.
pub(crate) const HARNESS_APPLICATION: &str = "wharf-chaos";
/// The database the run uses.
const DATABASE: &str = "chaos";
/// The inbox scope of the producers.
const TENANT: &str = "chaos";
const PROJECT: &str = "p1";

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
        config::config_file(&settings, &provider_base, smtp_wire.port),
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
    let watcher = tokio::spawn(watch::watch(shared.clone()));
    let sampler = tokio::spawn(watch::sample(shared.clone(), pool.clone()));
    let feeder = tokio::spawn(load::feed(
        shared.clone(),
        pool.clone(),
        provider_base.clone(),
    ));
    let mut producers = Vec::new();
    for (device, token) in credentials {
        producers.push(tokio::spawn(load::produce(
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
    watch::settle(&shared, &pool, &launch, deadline).await?;
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

    let verify_failures = evidence::verify(&launch).await;
    let evidence = Evidence {
        effects: recorder.effects(),
        enqueued,
        actions: evidence::action_rows(&pool).await?,
        verify_failures,
        sent,
        identities: evidence::identity_rows(&pool).await?,
        cursors: evidence::cursors(&pool).await?,
        audit: evidence::audit_rows(&pool).await?,
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
        provider_faults: evidence::provider_faults(&evidence),
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
