//! A scripted HTTP/1.1 server on loopback for the HTTP adapter tests.
//!
//! Owns: accepting connections, reading one request per connection, logging every copy it
//! received (with its Standard Webhooks signature checked when given a key), and answering as
//! the next step of its script says — including the misbehaviours a real framework will not
//! produce on demand: a reset or a close before any response, a response that never comes, a
//! body that trickles. Must not know: wharf. Written on raw tokio sockets rather than axum for
//! exactly those misbehaviours.
//!
//! Every response carries `Connection: close`, so each request is one connection and a copy in
//! the log is one delivery attempt, never a client's silent reconnect.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ed25519_dalek::VerifyingKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The largest request head the server reads.
const HEAD_BYTES_MAX: usize = 64 * 1024;
/// The largest request body the server reads.
const BODY_BYTES_MAX: usize = 4 * 1024 * 1024;

/// What the server does with one request.
#[derive(Debug, Clone)]
pub enum Step {
    /// Answer `status` with extra headers and a body.
    Respond {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// Answer `status` with a head that promises `chunks` bytes, then send one byte every
    /// `interval`.
    SlowBody {
        status: u16,
        chunks: usize,
        interval: Duration,
    },
    /// Read the request, then reset the connection (RST) without a response.
    Reset,
    /// Read the request, then hold the connection open without answering for this long.
    Hang(Duration),
}

impl Step {
    /// A plain response with an empty body.
    pub fn status(status: u16) -> Step {
        Step::Respond {
            status,
            headers: Vec::new(),
            body: String::new(),
        }
    }

    /// A response with one extra header.
    pub fn with_header(status: u16, name: &'static str, value: &str) -> Step {
        Step::Respond {
            status,
            headers: vec![(name, value.to_owned())],
            body: String::new(),
        }
    }
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names lowercased; the last value of a repeated header.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    /// Whether the Standard Webhooks signature verified, when the server has a key.
    pub signature_ok: Option<bool>,
    /// The status the server answered; `None` when it reset or never answered.
    pub answered: Option<u16>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// Whether the receiver may have kept this copy: it answered 2xx, or it never answered
    /// (what it did with the request is exactly what the sender cannot know).
    pub fn kept(&self) -> bool {
        self.answered.is_none_or(|s| (200..300).contains(&s))
    }
}

/// The server. Dropping it stops accepting.
pub struct ScriptedServer {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Received>>>,
    accepted: Arc<Mutex<usize>>,
    script: Arc<Mutex<VecDeque<Step>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScriptedServer {
    /// Starts on an ephemeral loopback port. Requests take the steps in order; after the last
    /// step the last one repeats.
    pub async fn start(steps: Vec<Step>, key: Option<VerifyingKey>) -> ScriptedServer {
        assert!(!steps.is_empty(), "a script needs at least one step");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(Mutex::new(0));
        let script = Arc::new(Mutex::new(steps.into_iter().collect::<VecDeque<_>>()));
        let task = tokio::spawn({
            let (log, accepted, script) = (log.clone(), accepted.clone(), script.clone());
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    *accepted.lock().unwrap() += 1;
                    let (log, script) = (log.clone(), script.clone());
                    tokio::spawn(async move {
                        let _ = serve(stream, log, script, key).await;
                    });
                }
            }
        });
        ScriptedServer {
            addr,
            log,
            accepted,
            script,
            task,
        }
    }

    /// Replaces the rest of the script.
    pub fn set_script(&self, steps: Vec<Step>) {
        assert!(!steps.is_empty(), "a script needs at least one step");
        *self.script.lock().unwrap() = steps.into_iter().collect();
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.log.lock().unwrap().clone()
    }

    /// Connections accepted so far (a refused destination must leave this at 0).
    pub fn connections(&self) -> usize {
        *self.accepted.lock().unwrap()
    }
}

fn next_step(script: &Mutex<VecDeque<Step>>) -> Step {
    let mut script = script.lock().unwrap();
    if script.len() > 1 {
        script.pop_front().unwrap()
    } else {
        script.front().cloned().unwrap()
    }
}

async fn serve(
    mut stream: TcpStream,
    log: Arc<Mutex<Vec<Received>>>,
    script: Arc<Mutex<VecDeque<Step>>>,
    key: Option<VerifyingKey>,
) -> std::io::Result<()> {
    let Some(mut received) = read_request(&mut stream, key).await? else {
        return Ok(());
    };
    let step = next_step(&script);
    received.answered = match &step {
        Step::Respond { status, .. } | Step::SlowBody { status, .. } => Some(*status),
        Step::Reset | Step::Hang(_) => None,
    };
    log.lock().unwrap().push(received);
    match step {
        Step::Respond {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-length: {}\r\nconnection: close\r\n",
                reason(status),
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            stream.shutdown().await?;
        }
        Step::SlowBody {
            status,
            chunks,
            interval,
        } => {
            let head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-length: {chunks}\r\nconnection: close\r\n\r\n",
                reason(status)
            );
            stream.write_all(head.as_bytes()).await?;
            stream.flush().await?;
            for _ in 0..chunks {
                tokio::time::sleep(interval).await;
                stream.write_all(b"x").await?;
                stream.flush().await?;
            }
        }
        Step::Reset => {
            // SO_LINGER 0 makes close send RST instead of FIN.
            stream.set_zero_linger()?;
            drop(stream);
        }
        Step::Hang(duration) => {
            tokio::time::sleep(duration).await;
        }
    }
    Ok(())
}

async fn read_request(
    stream: &mut TcpStream,
    key: Option<VerifyingKey>,
) -> std::io::Result<Option<Received>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > HEAD_BYTES_MAX {
            return Ok(None);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
        .min(BODY_BYTES_MAX);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    let signature_ok = key.map(|key| {
        let get = |n: &str| headers.get(n).map(String::as_str).unwrap_or_default();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        wharf_adapters::http::verify_webhook(
            &key,
            get("webhook-id"),
            get("webhook-timestamp"),
            &body,
            get("webhook-signature"),
            now,
            300,
        )
        .is_ok()
    });
    Ok(Some(Received {
        method,
        path,
        headers,
        body,
        signature_ok,
        answered: None,
    }))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        302 => "Found",
        400 => "Bad Request",
        404 => "Not Found",
        409 => "Conflict",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
