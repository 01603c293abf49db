//! `wharf bench inbox`: verified envelopes per second through the inbox, single and batch
//! endpoints, several streams (bench/DESIGN.md §5, SPEC §5: ≥ 5 k/s on the batch endpoint on
//! this 2-core machine).
//!
//! Setup is not timed: tenant [`TENANT`], project `bench`, one Ed25519 key per run, one device
//! credential per stream (a stream is tenant + project + producer, and the producer is the
//! verified device), limiters unlimited (every request comes from one address). Every envelope
//! is built, signed with `wharf_core::sign::sign` and serialised before the clock starts —
//! signing is the producer's cost, reported for information.
//!
//! Transports: `http` (the default) serves the real ingest router (`wharf_http::ingest`) on
//! `127.0.0.1:0` in this process, or sends to `--url` (a running `wharf serve` on the same
//! database), over `--connections` keep-alive HTTP/1.1 connections; `library` calls
//! [`Inbox::ingest`] / [`Inbox::ingest_batch`] directly (the same pipeline without HTTP). Every
//! response must accept every envelope (`accept-delayed`) and acknowledge the stream's last
//! sequence, and afterwards each stream's cursor must equal its last sequence with one audit row
//! per envelope; anything else fails the run.
//!
//! Memory: each batch size's result holds the process's resident set before sending (the
//! prepared requests are already in it) and its peak while sending, so a run with 1,000 and one
//! with 100,000 streams tell whether ingest holds anything per stream or producer. With `--url`
//! the server is another process and this is the load generator's alone.
//!
//! Baselines from the same run: pgbench `insert` at `--connections` clients (the commit rate
//! under the single endpoint, one transaction per envelope), `GET /healthz` requests/s over the
//! same connections (the HTTP stack's floor, `http` only), and strict Ed25519 verifications per
//! second on one core (the CPU floor: verified envelopes/s cannot exceed cores × that).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};
use sqlx::PgPool;
use wharf::core::envelope::{Envelope, Integrity};
use wharf::inbox::{self, Inbox, InboxConfig, LimitPolicy, Outcome, Route, Status};

use super::ceiling::{self, Script};
use super::http;
use super::report::{self, Machine};
use super::stats::{Distribution, ratio};
use super::{Deadline, TENANT};
use crate::Database;
use table::{print, summary};

mod table;

/// The project every benchmark envelope belongs to.
pub(crate) const PROJECT: &str = "bench";
/// Most envelopes one run may send (all are signed and held in memory first, ~600 bytes each).
pub(crate) const ENVELOPES_MAX: u64 = 2_000_000;
/// Streams one run may spread its envelopes over: enough for the memory goal's 100,000
/// producers, and below 2^24 so a stream's number fits its bits of the event id.
pub(crate) const STREAMS_MAX: u64 = 100_000;

/// How requests reach the inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Transport {
    /// HTTP/1.1 to the ingest router, served in this process on loopback (or `--url`).
    Http,
    /// In-process calls of `Inbox::ingest` / `Inbox::ingest_batch`: the whole pipeline
    /// without HTTP.
    Library,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Library => "library",
        }
    }
}

/// Where requests go.
#[derive(Clone)]
enum Target {
    /// `host:port` of an HTTP server.
    Http(String),
    /// The library, in-process.
    Library(Arc<Inbox>),
}

/// `wharf bench inbox` options.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct InboxArgs {
    /// Envelopes per batch size per run.
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..=ENVELOPES_MAX))]
    envelopes: u64,
    /// Streams (producers) the envelopes are spread over.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=STREAMS_MAX))]
    streams: u64,
    /// Envelopes per request; 1 uses the single endpoint, more the batch endpoint. Several
    /// (e.g. 1,100) are measured one after the other in each run.
    #[arg(long, value_delimiter = ',', default_value = "1,100")]
    batch: Vec<u64>,
    /// Requests in flight at once (each stream belongs to one of them and is sent in order).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=512))]
    connections: u32,
    /// How requests reach the inbox.
    #[arg(long, value_enum, default_value = "http")]
    transport: Transport,
    /// Send to this running server (http://host:port, `wharf serve` on the same database)
    /// instead of one served in this process. Its limiters apply: raise them for the run.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Runs; the medians are reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    runs: u32,
    /// pgbench seconds for the insert baseline per run; 0 = none.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=3600))]
    baseline_seconds: u32,
    /// Limit for the whole invocation.
    #[arg(long, default_value_t = 1_800, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    timeout_seconds: u64,
    /// Work beside non-benchmark rows in the database.
    #[arg(long)]
    shared_database: bool,
    /// One JSON line per run, then a summary line (last).
    #[arg(long)]
    json: bool,
    /// Also measure the JetStream consumer in each run (single envelopes published to a stream
    /// of the run's own, then consumed), beside the HTTP figures.
    #[arg(long)]
    jetstream: bool,
    /// The NATS server (with JetStream) for `--jetstream`.
    #[arg(long, value_name = "URL", default_value = "nats://127.0.0.1:4222")]
    nats: String,
}

/// One request, ready to send.
pub(super) struct Request {
    stream: usize,
    pub(super) token: Arc<str>,
    pub(super) body: Vec<u8>,
    /// For the batch endpoint.
    batch: bool,
    /// Envelopes in it.
    count: u64,
    /// The stream's sequence the answer must acknowledge.
    last_sequence: u64,
}

/// One stream of one run.
pub(super) struct Stream {
    device: String,
    last_sequence: u64,
}

/// `wharf bench inbox`.
pub(crate) async fn run(
    open: &impl AsyncFn(u32) -> anyhow::Result<Database>,
    args: InboxArgs,
) -> anyhow::Result<()> {
    ensure!(!args.batch.is_empty(), "--batch needs at least one size");
    let deadline = Deadline::after(args.timeout_seconds);
    let db = super::open(open, args.connections + 4, args.shared_database).await?;
    let mut machine = Machine::probe(&db.pool).await?;
    let result = runs(&args, &db.pool, &db.url, &deadline, &mut machine).await;
    let closed = db.close().await;
    let rows = result?;
    closed?;
    machine.end();
    let summary = summary(&args, &rows, &machine);
    if args.json {
        report::json_line(&summary)?;
    } else {
        print(&args, &rows, &summary, &machine);
    }
    Ok(())
}

async fn runs(
    args: &InboxArgs,
    pool: &PgPool,
    url: &str,
    deadline: &Deadline,
    machine: &mut Machine,
) -> anyhow::Result<Vec<Value>> {
    let _ = machine;
    inbox::create_tenant(pool, TENANT).await?;
    let config = InboxConfig {
        peer_limit: LimitPolicy::UNLIMITED,
        consumer_limit: LimitPolicy::UNLIMITED,
        identity_limit: LimitPolicy::UNLIMITED,
        batch_envelopes_max: InboxConfig::default()
            .batch_envelopes_max
            .max(args.batch.iter().copied().max().unwrap_or(1) as usize),
        ..InboxConfig::default()
    };
    let service = Arc::new(Inbox::new(pool.clone(), config));
    let mut server = None;
    let target = match (args.transport, &args.url) {
        (Transport::Library, None) => Target::Library(service.clone()),
        (Transport::Library, Some(_)) => bail!("--url needs --transport http"),
        (Transport::Http, Some(url)) => Target::Http(http::authority(url)?),
        (Transport::Http, None) => {
            let (authority, stop, task) = serve(service.clone(), pool.clone()).await?;
            server = Some((stop, task));
            Target::Http(authority)
        }
    };
    let result = measure_runs(args, pool, url, deadline, &target, &service).await;
    if let Some((stop, task)) = server {
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    }
    result
}

type ServerTask = tokio::task::JoinHandle<std::io::Result<()>>;

/// The real ingest and health routes on `127.0.0.1:0`, in this process.
async fn serve(
    service: Arc<Inbox>,
    pool: PgPool,
) -> anyhow::Result<(String, tokio::sync::oneshot::Sender<()>, ServerTask)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let authority = listener.local_addr()?.to_string();
    let app = wharf_http::app([
        wharf_http::ingest::routes(service),
        wharf_http::health::routes(pool, None),
    ]);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async {
            let _ = stopped.await;
        })
        .await
    });
    Ok((authority, stop, task))
}

async fn measure_runs(
    args: &InboxArgs,
    pool: &PgPool,
    url: &str,
    deadline: &Deadline,
    target: &Target,
    service: &Arc<Inbox>,
) -> anyhow::Result<Vec<Value>> {
    let tag = super::run_tag();
    let mut rows = Vec::new();
    for run in 1..=args.runs {
        let mut results = Vec::new();
        for &batch in &args.batch {
            deadline.check(|| format!("before run {run}, batch {batch}"))?;
            let prepared = prepare(args, pool, &format!("{tag}r{run}b{batch}"), batch).await?;
            super::checkpoint(pool).await;
            // What ingest itself holds: the resident set before sending (the prepared requests
            // are already in it) and its peak while sending, in this one process (server and
            // load generator; the generator allocates nothing per stream while it sends).
            report::reset_peak_rss();
            let (rss_before, _) = report::rss_mib();
            let sent = send(args, target, prepared.requests, deadline).await?;
            let (_, rss_peak) = report::rss_mib();
            check(pool, &prepared.streams, args.envelopes).await?;
            results.push(json!({
                "batch": batch,
                "endpoint": if batch == 1 { "single" } else { "batch" },
                "envelopes": args.envelopes,
                "seconds": sent.seconds,
                "envelopes_per_second": args.envelopes as f64 / sent.seconds,
                "request_ms": Distribution::of(sent.request_ms),
                "sign_per_second": prepared.sign_per_second,
                "rss_mib": {
                    "before": rss_before,
                    "peak": rss_peak,
                    "growth": rss_before.zip(rss_peak).map(|(b, p)| (p - b).max(0.0)),
                },
            }));
        }
        let jetstream = if args.jetstream {
            deadline.check(|| format!("before run {run}, jetstream"))?;
            let run_tag = format!("{tag}r{run}js");
            let prepared = prepare(args, pool, &run_tag, 1).await?;
            super::checkpoint(pool).await;
            Some(
                super::jetstream::measure(
                    &args.nats,
                    service.clone(),
                    pool,
                    &run_tag,
                    prepared,
                    args.envelopes,
                    deadline,
                )
                .await?,
            )
        } else {
            None
        };
        let insert = if args.baseline_seconds > 0 {
            let spinner = report::spinner("pgbench insert");
            let m = ceiling::measure(
                url,
                ceiling::Request {
                    script: Script::Insert,
                    clients: args.connections,
                    seconds: args.baseline_seconds,
                    batch: 1,
                    rows: None,
                },
            )
            .await;
            spinner.finish_and_clear();
            Some(m?.tps)
        } else {
            None
        };
        let healthz = match target {
            Target::Http(authority) => Some(healthz_rate(authority, args.connections).await?),
            Target::Library(_) => None,
        };
        let verify_per_second = verify_rate()?;
        let rate = |b: u64| {
            results
                .iter()
                .find(|r| r["batch"].as_u64() == Some(b))
                .and_then(|r| r["envelopes_per_second"].as_f64())
        };
        let single = rate(1);
        let best_batch = args
            .batch
            .iter()
            .filter(|&&b| b > 1)
            .filter_map(|&b| rate(b))
            .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
        let row = json!({
            "system": "wharf", "command": "inbox", "version": env!("CARGO_PKG_VERSION"),
            "run": run, "transport": args.transport.name(), "streams": args.streams,
            "connections": args.connections, "results": results,
            "ratio_batch_single": best_batch.zip(single).and_then(|(b, s)| ratio(b, s)),
            "jetstream": jetstream,
            "ratio_jetstream_batch": jetstream
                .as_ref()
                .and_then(|j| j["envelopes_per_second"].as_f64())
                .zip(best_batch)
                .and_then(|(j, b)| ratio(j, b)),
            "baseline": {
                "insert_commits_per_second": insert,
                "healthz_per_second": healthz,
                "verify_per_second_one_core": verify_per_second,
            },
            "ratio_single_insert": single.zip(insert).and_then(|(s, i)| ratio(s, i)),
            "ratio_batch_cpu_floor": best_batch.and_then(|b| {
                ratio(b, verify_per_second * std::thread::available_parallelism().map_or(1, usize::from) as f64)
            }),
        });
        if args.json {
            report::json_line(&row)?;
        }
        rows.push(row);
    }
    Ok(rows)
}

/// What a run sends, built and signed before the clock starts.
pub(super) struct Prepared {
    pub(super) streams: Vec<Stream>,
    pub(super) requests: Vec<Request>,
    sign_per_second: f64,
}

/// An event id shaped like a ULID: `0` and 25 Crockford digits of `n`.
fn event_id(n: u128) -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let mut out = vec![b'0'; 26];
    let mut v = n;
    for slot in out.iter_mut().skip(1).rev() {
        *slot = DIGITS[(v % 32) as usize];
        v /= 32;
    }
    String::from_utf8(out).unwrap_or_default()
}

fn envelope(device_seq: (u128, u64), occurred_at: &str) -> Envelope {
    let (stream_base, seq) = device_seq;
    Envelope {
        schema_version: 1,
        event_type: "event_summary".into(),
        tenant_id: TENANT.into(),
        project_id: PROJECT.into(),
        event_id: event_id(stream_base + u128::from(seq)),
        producer_sequence: seq,
        occurred_at: occurred_at.into(),
        idempotency_key: format!("bench-{seq}"),
        producer_version: concat!("wharf-bench/", env!("CARGO_PKG_VERSION")).into(),
        payload: json!({
            "summary_id": format!("summary-{seq}"),
            "object_id": format!("task-{seq}"),
            "event_kind": "bench",
            "status": "ok",
            "object_type": "task",
            "occurred_at": occurred_at,
            "version": 1,
        }),
        integrity: Integrity {
            algorithm: "Ed25519".into(),
            key_id: String::new(),
            signature: String::new(),
        },
    }
}

/// Credentials, a key, and every request of one batch size, signed.
async fn prepare(
    args: &InboxArgs,
    pool: &PgPool,
    tag: &str,
    batch: u64,
) -> anyhow::Result<Prepared> {
    let key = inbox::generate_key(
        pool,
        TENANT,
        PROJECT,
        Some(&format!("k{tag}")),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await?;
    // wharf-cli does not name ed25519-dalek's types; `sign` below fixes `signing`'s type.
    let signing = From::from(&key.private_seed);
    let sign = |e: &Envelope| -> anyhow::Result<Vec<u8>> {
        Ok(wharf::core::sign::sign(e, &signing, &key.key_id)?.to_canonical_json()?)
    };
    let per_stream = args.envelopes.div_ceil(args.streams);
    let occurred_at = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let mut streams = Vec::new();
    let mut requests = Vec::new();
    let bar = report::counter_bar(args.envelopes, "sign");
    let started = Instant::now();
    let mut left = args.envelopes;
    for s in 0..args.streams {
        let count = per_stream.min(left);
        left -= count;
        if count == 0 {
            break;
        }
        let device = format!("d{tag}s{s}");
        let credential = inbox::issue_credential(pool, TENANT, "bench", Some(&device)).await?;
        let token: Arc<str> = Arc::from(credential.token.as_str());
        // Event ids unique across streams and runs: the start time in µs above the sequence.
        // 24 bits each for the stream and the sequence (both bounded far below), the start
        // time above them (about 51 bits of µs; the id holds 125).
        let base = (micros << 48) + (u128::from(s) << 24);
        let mut seq = 0;
        while seq < count {
            let chunk = batch.min(count - seq);
            let mut bodies = Vec::with_capacity(chunk as usize);
            for _ in 0..chunk {
                seq += 1;
                bodies.push(sign(&envelope((base, seq), &occurred_at))?);
            }
            let body = if batch == 1 {
                bodies.pop().unwrap_or_default()
            } else {
                let mut body = b"{\"envelopes\":[".to_vec();
                for (i, b) in bodies.iter().enumerate() {
                    if i > 0 {
                        body.push(b',');
                    }
                    body.extend_from_slice(b);
                }
                body.extend_from_slice(b"]}");
                body
            };
            requests.push(Request {
                stream: streams.len(),
                token: token.clone(),
                body,
                batch: batch > 1,
                count: chunk,
                last_sequence: seq,
            });
            bar.inc(chunk);
        }
        streams.push(Stream {
            device,
            last_sequence: count,
        });
    }
    bar.finish_and_clear();
    Ok(Prepared {
        streams,
        requests,
        sign_per_second: args.envelopes as f64 / started.elapsed().as_secs_f64(),
    })
}

/// What sending measured.
struct Sent {
    seconds: f64,
    request_ms: Vec<f64>,
}

/// Sends every request on `--connections` senders; a stream's requests go in order on its
/// sender. Every envelope must be accepted and its stream's sequence acknowledged.
async fn send(
    args: &InboxArgs,
    target: &Target,
    requests: Vec<Request>,
    deadline: &Deadline,
) -> anyhow::Result<Sent> {
    let senders = args.connections as usize;
    let mut queues: Vec<Vec<Request>> = (0..senders).map(|_| Vec::new()).collect();
    for r in requests {
        queues[r.stream % senders].push(r);
    }
    let total: u64 = queues.iter().flatten().map(|r| r.count).sum();
    let bar = report::counter_bar(total, "ingest");
    // Connections are opened before the clock starts.
    let mut senders = Vec::new();
    for queue in queues {
        let client = match target {
            Target::Http(authority) => Some(http::Client::connect(authority).await?),
            Target::Library(_) => None,
        };
        senders.push((queue, client));
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (queue, mut client) in senders {
        let (target, bar, deadline) = (target.clone(), bar.clone(), *deadline);
        tasks.spawn(async move {
            let mut latencies = Vec::with_capacity(queue.len());
            for r in queue {
                deadline.check(|| "sending envelopes".to_owned())?;
                let t = Instant::now();
                let (acknowledged, accepted, status) = match (&target, client.as_mut()) {
                    (Target::Http(_), Some(client)) => post(client, &r).await?,
                    (Target::Library(service), _) => call(service, &r).await?,
                    (Target::Http(_), None) => bail!("no connection"),
                };
                latencies.push(t.elapsed().as_secs_f64() * 1_000.0);
                if accepted != r.count || acknowledged != Some(r.last_sequence) {
                    bail!(
                        "stream {}: {accepted} of {} envelopes accepted ({status}), acknowledged {:?}, expected {}",
                        r.stream,
                        r.count,
                        acknowledged,
                        r.last_sequence
                    );
                }
                bar.inc(r.count);
            }
            anyhow::Ok(latencies)
        });
    }
    let mut request_ms = Vec::new();
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        match joined.context("a sender panicked")? {
            Ok(l) => request_ms.extend(l),
            Err(e) => {
                failure.get_or_insert(e);
                tasks.abort_all();
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Sent {
        seconds,
        request_ms,
    })
}

/// One request through the library: (acknowledged sequence, envelopes accepted, status).
async fn call(service: &Inbox, r: &Request) -> anyhow::Result<(Option<u64>, u64, String)> {
    let peer: IpAddr = "127.0.0.1".parse()?;
    let route = Route::new(TENANT, PROJECT);
    Ok(if r.batch {
        let answer = service.ingest_batch(peer, &r.token, route, &r.body).await;
        let accepted = answer
            .items
            .iter()
            .filter(|i| i.outcome == Outcome::AcceptDelayed)
            .count() as u64;
        (
            answer.head.acknowledged_sequence,
            accepted,
            answer.head.status.as_str().to_owned(),
        )
    } else {
        let answer = service.ingest(peer, &r.token, route, &r.body).await;
        let ok = answer.status == Status::Outcome(Outcome::AcceptDelayed);
        (
            answer.acknowledged_sequence,
            u64::from(ok),
            answer.status.as_str().to_owned(),
        )
    })
}

/// One request over HTTP: (acknowledged sequence, envelopes accepted, status).
async fn post(
    client: &mut http::Client,
    r: &Request,
) -> anyhow::Result<(Option<u64>, u64, String)> {
    let path = if r.batch {
        format!("/v1/tenants/{TENANT}/projects/{PROJECT}/envelopes:batch")
    } else {
        format!("/v1/tenants/{TENANT}/projects/{PROJECT}/envelopes")
    };
    let (status, body) = client
        .request("POST", &path, Some(&r.token), &r.body)
        .await?;
    let answer: Value = serde_json::from_slice(&body).with_context(|| {
        format!(
            "HTTP {status}: not JSON: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        )
    })?;
    let accepted = if r.batch {
        answer["results"].as_array().map_or(0, |items| {
            items
                .iter()
                .filter(|i| i["outcome"] == "accept-delayed")
                .count()
        }) as u64
    } else {
        u64::from(answer["outcome"] == "accept-delayed")
    };
    let said = answer["outcome"]
        .as_str()
        .or(answer["code"].as_str())
        .unwrap_or("decided");
    Ok((
        answer["acknowledged_sequence"].as_u64(),
        accepted,
        format!("HTTP {status} {said}"),
    ))
}

/// `GET /healthz` requests per second over `connections` connections for 2 s: what the HTTP
/// stack alone can answer on this machine right now.
async fn healthz_rate(authority: &str, connections: u32) -> anyhow::Result<f64> {
    let window = Duration::from_secs(2);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..connections {
        let mut client = http::Client::connect(authority).await?;
        tasks.spawn(async move {
            let mut count = 0u64;
            // Bounded by the window and a count far above what 2 s allow.
            while started.elapsed() < window && count < 10_000_000 {
                let (status, _) = client.request("GET", "/healthz", None, b"").await?;
                ensure!(status == 200, "GET /healthz answered {status}");
                count += 1;
            }
            anyhow::Ok(count)
        });
    }
    let mut total = 0;
    while let Some(joined) = tasks.join_next().await {
        total += joined.context("a health probe panicked")??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// Each stream's cursor is its last sequence, and the audit holds one ingest row per envelope.
pub(super) async fn check(pool: &PgPool, streams: &[Stream], envelopes: u64) -> anyhow::Result<()> {
    let devices: Vec<&str> = streams.iter().map(|s| s.device.as_str()).collect();
    let cursors: Vec<(String, String)> = sqlx::query_as(
        "SELECT producer_id::text, acknowledged_sequence::text FROM wharf.inbox_streams
          WHERE tenant_id = $1 AND project_id = $2 AND producer_kind = 'device'
            AND producer_id::text = ANY($3)",
    )
    .bind(TENANT)
    .bind(PROJECT)
    .bind(&devices)
    .fetch_all(pool)
    .await?;
    ensure!(
        cursors.len() == streams.len(),
        "{} of {} streams exist",
        cursors.len(),
        streams.len()
    );
    // By map, not by search: a run may have 100,000 streams.
    let cursor_of: std::collections::HashMap<&str, &str> = cursors
        .iter()
        .map(|(d, c)| (d.as_str(), c.as_str()))
        .collect();
    for stream in streams {
        let cursor = cursor_of.get(stream.device.as_str()).copied();
        ensure!(
            cursor == Some(stream.last_sequence.to_string().as_str()),
            "stream {}: cursor {cursor:?}, expected {}",
            stream.device,
            stream.last_sequence
        );
    }
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM wharf.inbox_audit
          WHERE tenant_id = $1 AND action = 'ingest' AND producer_id = ANY($2)
            AND outcome = 'accept-delayed'",
    )
    .bind(TENANT)
    .bind(&devices)
    .fetch_one(pool)
    .await?;
    ensure!(
        audited as u64 == envelopes,
        "{audited} audit rows for {envelopes} envelopes"
    );
    Ok(())
}

/// Strict Ed25519 verifications per second on one core, over the signing bytes of a real
/// envelope (canonicalisation included): the CPU floor under verified envelopes/s.
fn verify_rate() -> anyhow::Result<f64> {
    let seed = [7u8; 32];
    let signing = From::from(&seed);
    let mut e = envelope((1, 1), "2026-01-01T00:00:00Z");
    e = wharf::core::sign::sign(&e, &signing, "k")?;
    let verifying = signing.verifying_key();
    let started = Instant::now();
    let mut count = 0u64;
    // Bounded by time (1 s) and count.
    while started.elapsed() < Duration::from_secs(1) && count < 10_000_000 {
        for _ in 0..64 {
            wharf::core::sign::verify(&e, &verifying)
                .context("the benchmark's own signature does not verify")?;
        }
        count += 64;
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}
