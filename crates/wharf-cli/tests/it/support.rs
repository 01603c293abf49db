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
}

impl Server {
    /// Starts `wharf serve` with `args` on a free port, in `cwd`, and waits for `/healthz`.
    pub async fn start(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::start_on(cwd, free_port(), args, env).await
    }

    /// As [`Server::start`], on a given port.
    pub async fn start_on(cwd: &Path, port: u16, args: &[&str], env: &[(&str, &str)]) -> Server {
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
        let child = cmd.spawn().expect("start wharf serve");
        let server = Server {
            child,
            base: format!("http://{listen}"),
        };
        let started = Instant::now();
        let client = http();
        loop {
            if let Ok(response) = client.get(format!("{}/healthz", server.base)).send().await {
                assert_eq!(response.status(), 200);
                return server;
            }
            assert!(
                started.elapsed() < Duration::from_millis(SERVER_START_MS_MAX),
                "wharf serve did not answer /healthz in time"
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
        let mut log = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            use std::io::Read;
            let _ = stderr.read_to_string(&mut log);
        }
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
