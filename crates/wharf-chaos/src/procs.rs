//! The wharf processes under test: `wharf work` replicas and one `wharf serve`, started from
//! the built binary with the run's configuration file, and the signals the faults send them.
//!
//! Owns: spawning, signalling and stopping children; their stderr goes to one log file each
//! (appended across restarts). Must not know: which fault to send when (the fault injector).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// How long a stopped process gets to exit after SIGINT before it is killed.
const EXIT_WAIT: Duration = Duration::from_secs(20);

/// Where the `wharf` binary is: `WHARF_BIN`, else `wharf` beside the running executable's
/// target directory (`target/<profile>/wharf`, also from `target/<profile>/deps/`).
pub fn locate_wharf() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("WHARF_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("cannot find the running executable")?;
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join("wharf");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "no wharf binary beside {}: build it first (cargo build -p wharf-cli) or set WHARF_BIN",
        exe.display()
    )
}

/// What every child gets: the binary, the configuration file and the database.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The `wharf` binary.
    pub wharf: PathBuf,
    /// The run's `wharf.toml`.
    pub config: PathBuf,
    /// The database URL.
    pub database_url: String,
    /// The run's directory (data dirs and logs go below it).
    pub dir: PathBuf,
}

impl Launch {
    /// A `wharf` command with only this run's configuration in its environment.
    pub fn command(&self, data_dir: &Path) -> Command {
        let mut cmd = Command::new(&self.wharf);
        for (key, _) in std::env::vars() {
            if key.starts_with("WHARF_") || key == "DATABASE_URL" || key == "RUST_LOG" {
                cmd.env_remove(key);
            }
        }
        cmd.env("WHARF_CONFIG", &self.config)
            .env("DATABASE_URL", &self.database_url)
            .env("WHARF_DATA_DIR", data_dir)
            .env("WHARF_LOG_FORMAT", "json")
            .stdin(Stdio::null());
        cmd
    }
}

/// One long-running wharf process that faults may kill, pause and restart.
pub struct Replica {
    /// Its name (`work-1`, `serve`).
    pub name: String,
    args: Vec<String>,
    launch: Launch,
    child: Option<Child>,
    /// Whether it is paused by SIGSTOP right now.
    pub stopped: bool,
    /// Times it was started.
    pub starts: u32,
    /// The fail point it is started with (`WHARF_FAIL_POINT`), if any.
    fail_point: Option<String>,
    /// SIGTERM was sent and the process is shutting down: its exit is expected.
    pub terminating: bool,
}

fn signal(child: &Child, signal: i32) {
    // SAFETY: kill has no memory-safety preconditions; the pid is our own, unreaped child's.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
}

impl Replica {
    /// Starts `wharf <args>` as `name`.
    pub fn start(name: &str, launch: &Launch, args: &[&str]) -> anyhow::Result<Replica> {
        let mut replica = Replica {
            name: name.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            launch: launch.clone(),
            child: None,
            stopped: false,
            starts: 0,
            fail_point: None,
            terminating: false,
        };
        replica.spawn()?;
        Ok(replica)
    }

    /// Starts `wharf <args>` as `name` with the fail point `point` armed
    /// (`WHARF_FAIL_POINT`): it exits at the first attempt that reaches it.
    pub fn start_armed(
        name: &str,
        launch: &Launch,
        args: &[&str],
        point: &str,
    ) -> anyhow::Result<Replica> {
        let mut replica = Replica {
            name: name.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            launch: launch.clone(),
            child: None,
            stopped: false,
            starts: 0,
            fail_point: Some(point.to_owned()),
            terminating: false,
        };
        replica.spawn()?;
        Ok(replica)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let data_dir = self.launch.dir.join(&self.name);
        std::fs::create_dir_all(&data_dir)?;
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.launch.dir.join(format!("{}.log", self.name)))?;
        let mut command = self.launch.command(&data_dir);
        if let Some(point) = &self.fail_point {
            command.env(wharf::outbox::FAIL_POINT_VAR, point);
        }
        let child = command
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", self.launch.wharf.display()))?;
        self.child = Some(child);
        self.stopped = false;
        self.starts += 1;
        Ok(())
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process exited on its own (a crash the faults did not cause).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// kill -9, reap, start again.
    pub fn kill_and_restart(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGKILL);
            let _ = child.wait();
        }
        self.spawn()
    }

    /// SIGTERM: the process shuts down gracefully (gives back what it holds, lets running
    /// attempts finish); [`Replica::restart`] once it exited.
    pub fn terminate(&mut self) {
        if let Some(child) = &self.child {
            signal(child, libc::SIGCONT);
            signal(child, libc::SIGTERM);
            self.terminating = true;
        }
    }

    /// Starts it again after it exited (reaped by [`Replica::exited`]), or kills it first.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.terminating = false;
        self.kill_and_restart()
    }

    /// SIGSTOP: the process keeps its connections and its leases but does nothing.
    pub fn pause(&mut self) {
        if let Some(child) = &self.child {
            signal(child, libc::SIGSTOP);
            self.stopped = true;
        }
    }

    /// SIGCONT.
    pub fn resume(&mut self) {
        if let Some(child) = &self.child {
            signal(child, libc::SIGCONT);
        }
        self.stopped = false;
    }

    /// SIGCONT, SIGINT, and a bounded wait for a clean exit (killed after that).
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        signal(&child, libc::SIGCONT);
        signal(&child, libc::SIGINT);
        let deadline = Instant::now() + EXIT_WAIT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                signal(&child, libc::SIGKILL);
                return child.wait().ok();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGCONT);
            signal(&child, libc::SIGKILL);
            let _ = child.wait();
        }
    }
}

/// Runs `wharf <args>` to its end (bounded by `limit`) and returns (success, stdout).
pub fn run_once(launch: &Launch, args: &[&str], limit: Duration) -> anyhow::Result<(bool, String)> {
    let data_dir = launch.dir.join("admin");
    std::fs::create_dir_all(&data_dir)?;
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(launch.dir.join("admin.log"))?;
    let mut child = launch
        .command(&data_dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {}", launch.wharf.display()))?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        text
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            signal(&child, libc::SIGKILL);
            let _ = child.wait();
            bail!("wharf {} did not finish in {limit:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = reader.join().unwrap_or_default();
    Ok((status.success(), text))
}
