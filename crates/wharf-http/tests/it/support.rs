//! A router served on a loopback port for one test, an HTTP client for it, a raw HTTP/1.1
//! exchange for what a well-behaved client never sends, a TCP proxy in front of PostgreSQL that
//! cuts a connection at a chosen statement, a census of every wharf table, and an action ended
//! by hand as wharf's endings end it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Serves `app` on a free loopback port until the test's runtime ends; returns its base URL.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    format!("http://{address}")
}

/// An HTTP client (ring as the process's TLS provider: wharf uses no other).
pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// What a raw exchange got back.
#[derive(Debug)]
pub struct RawAnswer {
    /// The status code of the first response line.
    pub status: u16,
    /// The body, when it is JSON.
    pub json: serde_json::Value,
    /// Time from the end of what was sent to the end of the answer.
    pub waited: Duration,
}

/// How long a raw exchange waits for an answer before the test fails. A server that waits for
/// a body the client never sends would run into it.
pub const RAW_ANSWER_MS_MAX: u64 = 5_000;

/// Sends `head` (request line and headers, CRLF-separated, ending with the blank line) and then
/// `body`, keeps the connection open without sending anything more, and reads the answer
/// (headers and a `Content-Length` body).
pub async fn raw(base: &str, head: &str, body: &[u8]) -> RawAnswer {
    let address = base.trim_start_matches("http://");
    let stream = TcpStream::connect(address).await.unwrap();
    let (mut stream, mut writer) = stream.into_split();
    writer.write_all(head.as_bytes()).await.unwrap();
    let sent = Instant::now();
    // The body is written beside the reading: it may be refused while it is still being sent,
    // and the answer must be read as soon as it comes, before the server closes.
    let body = body.to_vec();
    let _writing = tokio::spawn(async move {
        let _ = writer.write_all(&body).await;
        // Keep the connection open, sending nothing more, until the test is done with it.
        tokio::time::sleep(Duration::from_millis(RAW_ANSWER_MS_MAX)).await;
        drop(writer);
    });
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = Duration::from_millis(RAW_ANSWER_MS_MAX);
    loop {
        let left = deadline.saturating_sub(sent.elapsed());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => panic!(
                "no complete answer within {RAW_ANSWER_MS_MAX} ms; got {:?}",
                String::from_utf8_lossy(&got)
            ),
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
        if complete(&got) {
            break;
        }
    }
    let waited = sent.elapsed();
    let text = String::from_utf8_lossy(&got).into_owned();
    let (headers, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    RawAnswer {
        status,
        json: serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
        waited,
    }
}

/// Whether `got` holds a whole answer: headers and as many body bytes as they announce.
fn complete(got: &[u8]) -> bool {
    let text = String::from_utf8_lossy(got);
    let Some((headers, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = headers
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    body.len() >= length
}

/// Where a [`Proxy`] cuts the connection whose client sends the trap's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Before the bytes reach the server: the statement never runs.
    Before,
    /// After the bytes reached the server, and before its answer reaches the client: the
    /// statement ran (a COMMIT committed), and the client only sees its connection die.
    After,
}

/// The simple-query message sqlx sends to commit a transaction.
pub const COMMIT_MESSAGE: &[u8] = b"Q\0\0\0\x0bCOMMIT\0";

/// Milliseconds a [`Cut::After`] waits before it closes the connection, so the server has done
/// what the bytes asked (a commit on this machine takes well under that).
pub const CUT_AFTER_MS: u64 = 500;

struct Trap {
    needle: Vec<u8>,
    cut: Cut,
}

/// A TCP proxy to PostgreSQL that forwards every byte until a trap springs.
pub struct Proxy {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    trap: Arc<Mutex<Option<Trap>>>,
    sprung: Arc<AtomicUsize>,
}

impl Proxy {
    /// A proxy in front of the server `url` points at.
    pub async fn start(url: &str) -> Proxy {
        let options: PgConnectOptions = url.parse().unwrap();
        let upstream = format!("{}:{}", options.get_host(), options.get_port());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let trap: Arc<Mutex<Option<Trap>>> = Arc::new(Mutex::new(None));
        let sprung = Arc::new(AtomicUsize::new(0));
        let (t, s) = (trap.clone(), sprung.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(pipe(client, server, t.clone(), s.clone()));
            }
        });
        Proxy { port, trap, sprung }
    }

    /// A pool of `connections_max` connections to `url`'s database through this proxy.
    pub async fn pool(&self, url: &str, connections_max: u32) -> sqlx::PgPool {
        let options: PgConnectOptions = url.parse().unwrap();
        PgPoolOptions::new()
            .max_connections(connections_max)
            .connect_with(options.port(self.port))
            .await
            .unwrap()
    }

    /// Arms the trap: the next client chunk that holds `needle` is cut as `cut` says.
    pub fn arm(&self, needle: &[u8], cut: Cut) {
        *self.trap.lock().unwrap() = Some(Trap {
            needle: needle.to_vec(),
            cut,
        });
    }

    /// How many traps sprang so far.
    pub fn sprung(&self) -> usize {
        self.sprung.load(Ordering::SeqCst)
    }
}

async fn pipe(
    client: TcpStream,
    server: TcpStream,
    trap: Arc<Mutex<Option<Trap>>>,
    sprung: Arc<AtomicUsize>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let mut up = vec![0u8; 64 * 1024];
    let mut down = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            n = client_read.read(&mut up) => {
                let n = match n { Ok(0) | Err(_) => return, Ok(n) => n };
                let chunk = &up[..n];
                let hit = {
                    let mut armed = trap.lock().unwrap();
                    let found = armed
                        .as_ref()
                        .is_some_and(|t| chunk.windows(t.needle.len()).any(|w| w == t.needle));
                    if found { armed.take() } else { None }
                };
                match hit {
                    Some(Trap { cut: Cut::Before, .. }) => {
                        sprung.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                    Some(Trap { cut: Cut::After, .. }) => {
                        let _ = server_write.write_all(chunk).await;
                        sprung.fetch_add(1, Ordering::SeqCst);
                        // The server's answer stays unread; the client sees the connection die.
                        tokio::time::sleep(Duration::from_millis(CUT_AFTER_MS)).await;
                        return;
                    }
                    None => {
                        if server_write.write_all(chunk).await.is_err() {
                            return;
                        }
                    }
                }
            }
            n = server_read.read(&mut down) => {
                let n = match n { Ok(0) | Err(_) => return, Ok(n) => n };
                if client_write.write_all(&down[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Rows in every table of the `wharf` schema, by name (sqlx's migration table excluded).
pub async fn census(pool: &sqlx::PgPool) -> std::collections::BTreeMap<String, i64> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = 'wharf' AND table_type = 'BASE TABLE'
           AND table_name <> '_sqlx_migrations' ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut out = std::collections::BTreeMap::new();
    for table in tables {
        let sql = format!("SELECT count(*) FROM wharf.\"{table}\"");
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(pool)
            .await
            .unwrap();
        out.insert(table, n);
    }
    out
}

/// The test adapter of the admin routes: kind `noop`, done at once; it refuses a payload
/// holding `"refuse"`, so a test can see an adapter's refusal.
pub struct Noop;

#[async_trait::async_trait]
impl wharf::outbox::Adapter for Noop {
    fn spec(&self) -> wharf::outbox::KindSpec {
        wharf::outbox::KindSpec {
            name: "noop",
            at_most_once: false,
            instance_level: false,
            max_attempts_default: 3,
            backoff: wharf::outbox::Backoff::default(),
            call_timeout_ms: 1_000,
        }
    }

    fn validate(&self, payload: &serde_json::Value) -> Result<(), String> {
        if payload.get("refuse").is_some() {
            return Err("asked to refuse".into());
        }
        Ok(())
    }

    async fn execute(&self, _attempt: &mut wharf::outbox::Attempt) -> wharf::outbox::Outcome {
        wharf::outbox::Outcome::Done { readback_ref: None }
    }
}

/// Ends a live action by hand as wharf's endings do: the row moves from wharf.action_live to
/// wharf.action_ended (0060) with the given end.
pub async fn end_by_hand(
    pool: &sqlx::PgPool,
    id: i64,
    state: &str,
    reason: &str,
    error_code: Option<&str>,
) {
    sqlx::query(
        "WITH gone AS (DELETE FROM wharf.action_live WHERE id = $1 RETURNING *)
         INSERT INTO wharf.action_ended (id, kind, tenant_id, project_id, lane_key, idempotency_key,
                                         content_digest, at_most_once, instance_level, state,
                                         stop_reason, epoch, attempt, max_attempts, subject_account_id,
                                         run_at, expires_at, write_started_at, readback_ref, error_code,
                                         created_at, ended_at)
         SELECT id, kind, tenant_id, project_id, lane_key, idempotency_key, content_digest,
                at_most_once, instance_level, $2, $3, epoch, attempt, max_attempts,
                subject_account_id, run_at, expires_at, write_started_at, readback_ref, $4, created_at,
                now()
           FROM gone",
    )
    .bind(id)
    .bind(state)
    .bind(reason)
    .bind(error_code)
    .execute(pool)
    .await
    .unwrap();
}
