//! Running the `wharf` binary from tests.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started server may take to answer `/healthz`: initdb plus a cold start on a
/// loaded 2-core machine.
pub const SERVER_START_MS_MAX: u64 = 60_000;

/// The `wharf` executable under test, with a clean environment for wharf's own variables.
pub fn wharf() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wharf"));
    for (key, _) in std::env::vars() {
        if key.starts_with("WHARF_") || key == "DATABASE_URL" {
            cmd.env_remove(key);
        }
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// An HTTP client. reqwest is built without a bundled crypto provider (wharf uses ring
/// everywhere, never two TLS backends), so install ring as the process default first.
pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// A free loopback port.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `wharf serve`, interrupted (as Ctrl-C would) when dropped.
pub struct Server {
    pub child: Child,
    pub base: String,
    /// Everything it wrote to stderr so far.
    pub log: Log,
}

impl Server {
    /// Starts `wharf serve` with `args` on a free port, in `cwd`, and waits until it is ready
    /// (`/readyz` answers 200: the database answered and the full API is served).
    pub async fn start(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::start_on(cwd, free_port(), args, env).await
    }

    /// As [`Server::start`], on a given port.
    pub async fn start_on(cwd: &Path, port: u16, args: &[&str], env: &[(&str, &str)]) -> Server {
        let server = Server::spawn_on(cwd, port, args, env).await;
        server.wait_for("/readyz").await;
        server
    }

    /// Starts `wharf serve` and waits only until it listens (`/healthz` answers), which it does
    /// before its database answers.
    pub async fn spawn_on(cwd: &Path, port: u16, args: &[&str], env: &[(&str, &str)]) -> Server {
        let listen = format!("127.0.0.1:{port}");
        let mut cmd = wharf();
        cmd.current_dir(cwd)
            .arg("serve")
            .args(["--listen", &listen])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start wharf serve");
        let log = Log::collect(child.stderr.take().expect("stderr is piped"));
        let server = Server {
            child,
            base: format!("http://{listen}"),
            log,
        };
        server.wait_for("/healthz").await;
        server
    }

    /// Waits until `path` answers 200.
    pub async fn wait_for(&self, path: &str) {
        let started = Instant::now();
        let client = http();
        loop {
            if let Ok(response) = client.get(format!("{}{path}", self.base)).send().await
                && response.status() == 200
            {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_millis(SERVER_START_MS_MAX),
                "wharf serve did not answer {path} in time: {}",
                self.log.text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sends SIGINT and waits for a clean exit; returns what it logged.
    pub fn interrupt(mut self) -> String {
        // SAFETY: kill has no memory-safety preconditions; the pid is our own child's.
        unsafe {
            libc_kill(self.child.id() as i32, 2);
        }
        let status = self.child.wait().expect("wait for wharf serve");
        let log = self.log.finish();
        assert!(status.success(), "wharf serve exited with {status}: {log}");
        log
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe {
            libc_kill(self.child.id() as i32, 2);
        }
        let _ = self.child.wait();
    }
}

/// A child's stderr, collected line by line on a thread of its own, readable while it runs.
#[derive(Clone)]
pub struct Log {
    text: std::sync::Arc<std::sync::Mutex<String>>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Log {
    /// Starts collecting `stderr`.
    pub fn collect(stderr: std::process::ChildStderr) -> Log {
        let log = Log {
            text: Default::default(),
            done: Default::default(),
        };
        let (text, done) = (log.text.clone(), log.done.clone());
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut text = text.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        log
    }

    /// What was collected so far.
    pub fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// Waits (a bounded while) for the stream to end, then returns everything.
    pub fn finish(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.done.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.text()
    }

    /// Waits until the log holds every one of `needles`, up to `ms_max`; returns the log.
    pub async fn wait_for(&self, needles: &[&str], ms_max: u64) -> String {
        let started = Instant::now();
        loop {
            let text = self.text();
            if needles.iter().all(|n| text.contains(n)) {
                return text;
            }
            assert!(
                started.elapsed() < Duration::from_millis(ms_max),
                "the log never said {needles:?}: {text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
}

/// Whether a postgres process still serves a data directory under `dir`, giving processes that
/// are on their way out (pg_ctl returns once the pid file is gone, a moment before the last
/// process exits) up to five seconds to finish.
pub fn postgres_running_under(dir: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while postgres_process_under(dir) {
        if Instant::now() > deadline {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Whether a postgres process serves a data directory under `dir` right now.
pub fn postgres_process_under(dir: &Path) -> bool {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .any(|cmdline| cmdline.contains("postgres") && cmdline.contains(&needle))
}

/// What a [`Forwarder`] does with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarding {
    /// Accepts and resets it at once (`Connection reset by peer`, as a restarting server does).
    Reset,
    /// Sends back what the client sends, as a TCP self-connect does (a server down on a port
    /// in the ephemeral range: the client connects to itself and reads its own SSLRequest).
    Echo,
    /// Forwards it to the real server.
    Forward,
    /// Forwards what the client sends, keeps the server's answer to itself, and resets the
    /// client once the server answered: the request arrived, its answer was lost.
    LoseAnswers,
}

/// A database that appears on a port: a TCP forwarder to a real PostgreSQL, started on a port
/// where nothing listened before.
pub struct Forwarder {
    mode: std::sync::Arc<std::sync::Mutex<Forwarding>>,
}

impl Forwarder {
    /// Listens on `port` from now on, in `mode`, forwarding to `upstream` (`host:port`).
    pub async fn start(port: u16, upstream: String, mode: Forwarding) -> Forwarder {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("the port is free again");
        let mode = std::sync::Arc::new(std::sync::Mutex::new(mode));
        let m = mode.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let now = *m.lock().unwrap();
                match now {
                    Forwarding::Reset => {
                        let _ = client.set_zero_linger();
                        drop(client);
                    }
                    Forwarding::Echo => {
                        tokio::spawn(async move {
                            let (mut read, mut write) = client.split();
                            let _ = tokio::io::copy(&mut read, &mut write).await;
                        });
                    }
                    Forwarding::LoseAnswers => {
                        let upstream = upstream.clone();
                        tokio::spawn(async move {
                            use tokio::io::AsyncReadExt as _;
                            let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                                return;
                            };
                            let (mut from_server, mut to_server) = server.into_split();
                            let (mut from_client, _to_client) = client.split();
                            let forward = tokio::io::copy(&mut from_client, &mut to_server);
                            let mut answer = [0u8; 1];
                            tokio::select! {
                                _ = forward => {}
                                _ = from_server.read(&mut answer) => {}
                            }
                            let _ = client.set_zero_linger();
                            drop(client);
                        });
                    }
                    Forwarding::Forward => {
                        let upstream = upstream.clone();
                        tokio::spawn(async move {
                            if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                                let _ =
                                    tokio::io::copy_bidirectional(&mut client, &mut server).await;
                            }
                        });
                    }
                }
            }
        });
        Forwarder { mode }
    }

    /// Changes what later connections get.
    pub fn set(&self, mode: Forwarding) {
        *self.mode.lock().unwrap() = mode;
    }
}

/// `url` with its port replaced, and the `host:port` it pointed at before.
pub fn repoint(url: &str, port: u16) -> (String, String) {
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let upstream = format!("{}:{}", options.get_host(), options.get_port());
    let old = format!(":{}/", options.get_port());
    assert!(url.contains(&old), "{url} has no explicit port");
    (url.replacen(&old, &format!(":{port}/"), 1), upstream)
}
