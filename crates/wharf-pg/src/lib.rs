//! A private PostgreSQL cluster, started from the machine's own PostgreSQL installation.
//!
//! Owns: finding `initdb`/`pg_ctl`/`postgres`, creating a cluster in a directory, starting it on a
//! private Unix socket and 127.0.0.1 on a free port, reusing one that already runs for that
//! directory, and stopping it. When the process runs as root (where `initdb` refuses to run), the
//! cluster belongs to the `postgres` system user and every PostgreSQL program runs through
//! `runuser`.
//!
//! Must not know: SQL, wharf's schema, sqlx. It hands out a connection URL and nothing more.
//!
//! Layout under the cluster directory `dir`:
//!
//! | path | what | owner |
//! |---|---|---|
//! | `dir/data` | `PGDATA` | the server user |
//! | `dir/run` | the Unix socket | the server user |
//! | `dir/password` | the superuser's random password (0600) | the invoking user |
//! | `dir/data/wharf-server.log` | the server log | the server user |
//! | `dir/lock` | taken (flock) while a process starts, joins, leaves or stops the cluster | the invoking user |
//! | `dir/holders/<pid>-<n>` | one file per live [`Cluster`] value: its process's start time | the invoking user |
//!
//! Sharing: several processes (a `serve`, a `work`, admin commands) may use one cluster at once.
//! Each registers itself as a holder under the lock; dropping or stopping a [`Cluster`] removes
//! its holder, and the last holder out stops the server. Holders of processes that are gone
//! (killed with SIGKILL, a crashed machine) are pruned under the lock, so a server that a killed
//! process left running is adopted by the next process and stopped when that one is done.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The superuser role every wharf cluster is created with.
pub const SUPERUSER: &str = "wharf";

/// Unix socket paths are limited to 107 bytes; leave room for `/.s.PGSQL.NNNNN`.
const SOCKET_DIR_BYTES_MAX: usize = 80;

/// How long `pg_ctl` may wait for a start or stop. A cold start on a busy 2-core machine takes
/// about a second; 60 s only matters when something is really wrong.
const PG_CTL_WAIT_SECONDS: u32 = 60;

/// Why a cluster could not be found, created, started or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The PostgreSQL server programs are not installed (or not where we looked).
    /// Retrying will not help; install the package or use an existing database.
    #[error(
        "PostgreSQL server programs (initdb, pg_ctl, postgres) were not found on PATH or in {searched}.\n\
         Install the PostgreSQL server package (Debian/Ubuntu: `apt-get install postgresql`, \
         Fedora: `dnf install postgresql-server`, macOS: `brew install postgresql`), \
         set WHARF_PG_BIN_DIR to its bin directory, \
         or give wharf an existing database with --database-url (or DATABASE_URL)."
    )]
    NotInstalled {
        /// The directories that were searched besides PATH.
        searched: String,
    },
    /// Running as root, but the machine has no `postgres` user to run the server as.
    #[error(
        "wharf runs as root, and PostgreSQL refuses to run as root, but there is no `postgres` \
         system user to run it as. Create one (`adduser --system --group postgres`), run wharf as \
         an ordinary user, or use --database-url (or DATABASE_URL)."
    )]
    NoServerUser,
    /// Running as root, but `runuser` (util-linux) is missing.
    #[error(
        "wharf runs as root and needs `runuser` (util-linux) to start PostgreSQL as the \
         `postgres` user, but it was not found. Install util-linux, run wharf as an ordinary \
         user, or use --database-url (or DATABASE_URL)."
    )]
    NoRunuser,
    /// The data directory belongs to another user, so the server could not use it.
    #[error(
        "the PostgreSQL data directory {path} is owned by uid {found}, but the server runs as \
         uid {expected}. Choose another --data-dir, or give the directory to that user \
         (`chown -R {expected} {path}`)."
    )]
    ForeignOwner {
        /// The data directory.
        path: PathBuf,
        /// Its owner.
        found: u32,
        /// The user the server runs as.
        expected: u32,
    },
    /// The directory exists but is not a PostgreSQL cluster (and not empty).
    #[error(
        "{path} exists but holds no PostgreSQL cluster (no PG_VERSION) and is not empty; \
         choose another --data-dir or empty it"
    )]
    NotACluster {
        /// The data directory.
        path: PathBuf,
    },
    /// The cluster exists but its password file is gone, so nobody can log in to it.
    #[error(
        "the PostgreSQL cluster in {data} has no password file {password}; restore that file, \
         or remove the directory to start a new cluster (its data is lost), or use \
         --database-url (or DATABASE_URL)"
    )]
    PasswordMissing {
        /// The data directory.
        data: PathBuf,
        /// Where the password file should be.
        password: PathBuf,
    },
    /// A PostgreSQL program failed; its output is included. Retrying rarely helps; read it.
    #[error("{program} failed ({status}): {output}")]
    Program {
        /// Which program.
        program: String,
        /// Its exit status.
        status: String,
        /// What it printed, trimmed.
        output: String,
    },
    /// `wharf db stop` without `--force` while wharf processes still use the cluster.
    #[error(
        "the embedded PostgreSQL in {dir} is in use by wharf process(es) {holders}; stop them \
         first (the last one out stops the database), or pass --force to stop it under them"
    )]
    InUse {
        /// The cluster directory.
        dir: PathBuf,
        /// The holders, `pid (command)`, comma-separated.
        holders: String,
    },
    /// A file-system operation on the cluster directory failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// Where the PostgreSQL server programs are.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The directory holding `initdb`, `pg_ctl` and `postgres`.
    pub bin_dir: PathBuf,
}

impl Binaries {
    /// Looks in `WHARF_PG_BIN_DIR`, then PATH, then the usual install directories (newest
    /// major version first).
    pub fn locate() -> Result<Binaries, Error> {
        let mut candidates = Vec::new();
        if let Some(dir) = std::env::var_os("WHARF_PG_BIN_DIR") {
            candidates.push(PathBuf::from(dir));
        }
        if let Some(path) = std::env::var_os("PATH") {
            candidates.extend(std::env::split_paths(&path));
        }
        candidates.extend(usual_install_dirs());
        Binaries::locate_in(&candidates)
    }

    /// Looks only in `dirs`, in order. The error names them.
    pub fn locate_in(dirs: &[PathBuf]) -> Result<Binaries, Error> {
        for dir in dirs {
            if ["initdb", "pg_ctl", "postgres"]
                .iter()
                .all(|program| is_executable(&dir.join(program)))
            {
                // PATH often holds symlinks into the real bin directory; resolve them so that
                // the three programs are known to come from one installation.
                let bin_dir = fs::canonicalize(dir.join("initdb"))
                    .ok()
                    .and_then(|p| p.parent().map(Path::to_owned))
                    .filter(|d| is_executable(&d.join("pg_ctl")))
                    .unwrap_or_else(|| dir.clone());
                return Ok(Binaries { bin_dir });
            }
        }
        let searched = usual_install_dirs()
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Err(Error::NotInstalled {
            searched: if searched.is_empty() {
                "/usr/lib/postgresql/*/bin".into()
            } else {
                searched
            },
        })
    }

    fn program(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }
}

fn usual_install_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for root in ["/usr/lib/postgresql", "/usr/pgsql", "/opt/homebrew/opt"] {
        if let Ok(entries) = fs::read_dir(root) {
            let mut versions: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path().join("bin"))
                .collect();
            // Newest first: "17" sorts after "15" by number, not by string.
            versions.sort_by_key(|p| {
                let name = p.parent().and_then(Path::file_name);
                let digits: String = name
                    .map(|n| {
                        n.to_string_lossy()
                            .chars()
                            .filter(char::is_ascii_digit)
                            .collect()
                    })
                    .unwrap_or_default();
                std::cmp::Reverse(digits.parse::<u32>().unwrap_or(0))
            });
            dirs.extend(versions);
        }
    }
    dirs.push(PathBuf::from("/usr/local/pgsql/bin"));
    dirs
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Who runs the server: the current user, or (when we are root) the `postgres` user via runuser.
#[derive(Debug, Clone)]
enum RunAs {
    Me,
    Postgres {
        uid: u32,
        gid: u32,
        runuser: PathBuf,
    },
}

impl RunAs {
    fn detect() -> Result<RunAs, Error> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(RunAs::Me);
        }
        let (uid, gid) = lookup_user("postgres").ok_or(Error::NoServerUser)?;
        let runuser = [
            "/usr/sbin/runuser",
            "/sbin/runuser",
            "/usr/bin/runuser",
            "/bin/runuser",
        ]
        .iter()
        .map(PathBuf::from)
        .find(|p| is_executable(p))
        .ok_or(Error::NoRunuser)?;
        Ok(RunAs::Postgres { uid, gid, runuser })
    }

    fn uid(&self) -> u32 {
        match self {
            // SAFETY: geteuid has no preconditions and cannot fail.
            RunAs::Me => unsafe { libc::geteuid() },
            RunAs::Postgres { uid, .. } => *uid,
        }
    }

    fn command(&self, program: &Path) -> Command {
        match self {
            RunAs::Me => Command::new(program),
            RunAs::Postgres { runuser, .. } => {
                let mut cmd = Command::new(runuser);
                cmd.args(["-u", "postgres", "--"]).arg(program);
                cmd
            }
        }
    }

    /// Gives `path` to the server user (no-op when that is us).
    fn hand_over(&self, path: &Path) -> Result<(), Error> {
        if let RunAs::Postgres { uid, gid, .. } = self {
            std::os::unix::fs::chown(path, Some(*uid), Some(*gid))
                .map_err(io_err("cannot give to the postgres user", path))?;
        }
        Ok(())
    }
}

fn lookup_user(name: &str) -> Option<(u32, u32)> {
    // /etc/passwd is enough here: the postgres user of a distribution package is always local,
    // and reading it avoids getpwnam's thread-safety caveats.
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 4 && fields[0] == name)
            .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
            .flatten()
    })
}

/// How to create and run a cluster.
#[derive(Debug, Clone)]
pub struct Options {
    /// The cluster directory (see the module docs for what goes inside).
    pub dir: PathBuf,
    /// Throw-away cluster for tests: no fsync, no crash safety, removed when the owning process
    /// ends (even when it is killed).
    pub ephemeral: bool,
    /// Extra `-c name=value` server settings.
    pub settings: Vec<(String, String)>,
}

impl Options {
    /// A durable cluster in `dir`, kept between runs.
    pub fn durable(dir: impl Into<PathBuf>) -> Options {
        Options {
            dir: dir.into(),
            ephemeral: false,
            settings: vec![("max_connections".into(), "200".into())],
        }
    }

    /// A throw-away cluster in `dir` for tests.
    pub fn ephemeral(dir: impl Into<PathBuf>) -> Options {
        Options {
            dir: dir.into(),
            ephemeral: true,
            settings: [
                ("fsync", "off"),
                ("synchronous_commit", "off"),
                ("full_page_writes", "off"),
                // Tests run in parallel, each with its own pool and database.
                ("max_connections", "400"),
                ("shared_buffers", "128MB"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        }
    }
}

/// A running cluster. Dropping it leaves the cluster; the last holder out stops the server.
#[derive(Debug)]
pub struct Cluster {
    binaries: Binaries,
    run_as: RunAs,
    data_dir: PathBuf,
    port: u16,
    password: String,
    started_here: bool,
    /// How this value came to the server (started, joined, adopted), for logs.
    joined: Joined,
    /// This value's holder file; `None` once it has left.
    holder: Option<PathBuf>,
    /// The cluster directory (where `lock` and `holders/` live).
    dir: PathBuf,
    /// The `-o` options the server was started with (port, sockets, settings), so a crash
    /// restart brings it back exactly as it was.
    server_options: OsString,
}

/// How a [`Cluster`] value came to its server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Joined {
    /// This value started the server.
    Started,
    /// The server was running for other live processes (their pids); this value joined them.
    Shared(Vec<u32>),
    /// The server was running with no live holder (its starter was killed); this value adopted
    /// it and, as the last holder out, stops it.
    Adopted,
}

/// What [`status`] finds in a cluster directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The cluster directory.
    pub dir: PathBuf,
    /// Whether a cluster was ever created there.
    pub initialised: bool,
    /// The TCP port on 127.0.0.1 when the server runs.
    pub port: Option<u16>,
    /// The live processes holding the cluster, with their command lines when readable.
    pub holders: Vec<Holder>,
}

/// A live process that holds a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its process id.
    pub pid: u32,
    /// Its command line, space-joined, when `/proc` shows it.
    pub command: Option<String>,
}

/// What [`stop_dir`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stopped {
    /// The server was stopped.
    Stopped,
    /// No server was running.
    NotRunning,
}

impl Cluster {
    /// Creates the cluster if needed and starts it, or reuses the server already running for
    /// this directory.
    pub fn start(options: &Options) -> Result<Cluster, Error> {
        Cluster::start_with(Binaries::locate()?, options)
    }

    /// As [`Cluster::start`], with the programs already located.
    pub fn start_with(binaries: Binaries, options: &Options) -> Result<Cluster, Error> {
        let run_as = RunAs::detect()?;
        let dir = &reachable_dir(&options.dir, &run_as)?;
        fs::create_dir_all(dir).map_err(io_err("cannot create", dir))?;
        let dir = fs::canonicalize(dir).map_err(io_err("cannot resolve", dir))?;
        if matches!(run_as, RunAs::Postgres { .. }) {
            // The postgres user must be able to reach the directory.
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))
                .map_err(io_err("cannot open up", &dir))?;
        }
        let data_dir = dir.join("data");
        let password_file = dir.join("password");

        let initialised = data_dir.join("PG_VERSION").exists();
        let password = match fs::read_to_string(&password_file) {
            Ok(p) => p.trim().to_owned(),
            Err(_) if initialised => {
                return Err(Error::PasswordMissing {
                    data: data_dir,
                    password: password_file,
                });
            }
            Err(_) => random_password(),
        };
        if !initialised {
            init(&binaries, &run_as, &data_dir, &password, options.ephemeral)?;
            write_private(&password_file, &password)?;
        }
        check_owner(&data_dir, run_as.uid())?;

        // Everything from here to the holder file is one step under the lock, so two
        // processes never both start the server, and none stops it while another joins.
        let _lock = DirLock::take(&dir)?;
        let others = live_holders(&dir)?;
        if let Some(port) = running_port(&binaries, &run_as, &data_dir) {
            let joined = if others.is_empty() {
                // Warn: a wharf process was killed (or crashed) without stopping its cluster.
                tracing::warn!(
                    data_dir = %data_dir.display(),
                    port,
                    "adopting the embedded PostgreSQL an earlier process left running; \
                     it stops when the last wharf process using it exits"
                );
                Joined::Adopted
            } else {
                let pids: Vec<u32> = others.iter().map(|h| h.pid).collect();
                tracing::info!(
                    data_dir = %data_dir.display(),
                    port,
                    shared_with = ?pids,
                    "joining the embedded PostgreSQL other wharf processes use; \
                     it stops when the last of them exits"
                );
                Joined::Shared(pids)
            };
            let holder = add_holder(&dir)?;
            return Ok(Cluster {
                binaries,
                run_as,
                data_dir,
                port,
                password,
                started_here: false,
                joined,
                holder: Some(holder),
                dir,
                server_options: OsString::new(),
            });
        }

        let socket_dir = socket_dir(&dir)?;
        fs::create_dir_all(&socket_dir).map_err(io_err("cannot create", &socket_dir))?;
        run_as.hand_over(&socket_dir)?;

        // A free port can be taken between our probe and the server's bind; try a few.
        let mut last_error = None;
        for _ in 0..5 {
            let port = free_port(&data_dir)?;
            match start_server(&binaries, &run_as, &data_dir, &socket_dir, port, options) {
                Ok(()) => {
                    let holder = add_holder(&dir)?;
                    let cluster = Cluster {
                        binaries,
                        run_as,
                        data_dir,
                        port,
                        password,
                        started_here: true,
                        joined: Joined::Started,
                        holder: Some(holder),
                        dir: dir.clone(),
                        server_options: server_options(&socket_dir, port, options),
                    };
                    if options.ephemeral {
                        cluster.spawn_watchdog(&dir)?;
                    }
                    return Ok(cluster);
                }
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.expect("at least one start attempt ran"))
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory (`PGDATA`).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Whether this value started the server.
    pub fn started_here(&self) -> bool {
        self.started_here
    }

    /// How this value came to the server: started, shared with live processes, or adopted.
    pub fn joined(&self) -> &Joined {
        &self.joined
    }

    /// A connection URL for `database` as the superuser.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{SUPERUSER}:{}@127.0.0.1:{}/{database}",
            self.password, self.port
        )
    }

    /// Leaves the cluster, stopping the server when no other live process holds it. Safe to
    /// call twice.
    pub fn stop(&mut self) -> Result<(), Error> {
        let Some(holder) = self.holder.take() else {
            return Ok(());
        };
        let _lock = DirLock::take(&self.dir)?;
        let _ = fs::remove_file(&holder);
        let others = live_holders(&self.dir)?;
        if !others.is_empty() {
            tracing::info!(
                data_dir = %self.data_dir.display(),
                still_used_by = ?others.iter().map(|h| h.pid).collect::<Vec<_>>(),
                "leaving the embedded PostgreSQL running for the other wharf processes"
            );
            return Ok(());
        }
        pg_ctl_stop(&self.binaries, &self.run_as, &self.data_dir)
    }

    /// Crashes the server (`pg_ctl stop -m immediate`: every backend is killed, no checkpoint,
    /// crash recovery at the next start), waits `down`, and starts it again on the same port
    /// with the same settings. For fault injection; only for a server this value started and
    /// has not left.
    pub fn crash_restart(&self, down: std::time::Duration) -> Result<(), Error> {
        if !self.started_here || self.holder.is_none() {
            return Err(Error::Program {
                program: "pg_ctl restart".into(),
                status: "not run".into(),
                output: "only a server this process started can be restarted".into(),
            });
        }
        let mut stop = self.run_as.command(&self.binaries.program("pg_ctl"));
        stop.arg("stop")
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-m", "immediate", "-w", "-t"])
            .arg(PG_CTL_WAIT_SECONDS.to_string());
        run(stop, "pg_ctl stop")?;
        std::thread::sleep(down);
        let mut start = self.run_as.command(&self.binaries.program("pg_ctl"));
        start
            .arg("start")
            .arg("-D")
            .arg(&self.data_dir)
            .arg("-l")
            .arg(self.data_dir.join("wharf-server.log"))
            .args(["-w", "-t"])
            .arg(PG_CTL_WAIT_SECONDS.to_string())
            .arg("-o")
            .arg(&self.server_options);
        run(start, "pg_ctl start")
    }

    /// A detached process that stops the server and removes `dir` once this process is gone,
    /// however it ended. Tests rely on it: a killed test run leaves no server behind.
    fn spawn_watchdog(&self, dir: &Path) -> Result<(), Error> {
        let pg_ctl = self.binaries.program("pg_ctl");
        let mut stop = String::new();
        if let RunAs::Postgres { runuser, .. } = &self.run_as {
            let _ = write!(stop, "{} -u postgres -- ", quote(runuser));
        }
        let _ = write!(
            stop,
            "{} stop -D {} -m immediate -w >/dev/null 2>&1",
            quote(&pg_ctl),
            quote(&self.data_dir)
        );
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.2; done; {stop}; rm -rf {dir}",
            pid = std::process::id(),
            dir = quote(dir),
        );
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Its own session, so a Ctrl-C aimed at the test run does not kill the cleanup.
        // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        cmd.spawn()
            .map_err(io_err("cannot start the watchdog for", dir))?;
        Ok(())
    }
}

fn pg_ctl_stop(binaries: &Binaries, run_as: &RunAs, data_dir: &Path) -> Result<(), Error> {
    let mut cmd = run_as.command(&binaries.program("pg_ctl"));
    cmd.arg("stop")
        .arg("-D")
        .arg(data_dir)
        .args(["-m", "fast", "-w", "-t"])
        .arg(PG_CTL_WAIT_SECONDS.to_string());
    run(cmd, "pg_ctl stop")
}

/// What runs in the cluster directory of `dir` (resolved as [`Cluster::start`] resolves it),
/// without starting, creating or joining anything.
pub fn status(dir: &Path) -> Result<Status, Error> {
    let binaries = Binaries::locate()?;
    let run_as = RunAs::detect()?;
    let dir = resolved_dir(dir, &run_as)?;
    let data_dir = dir.join("data");
    let initialised = data_dir.join("PG_VERSION").exists();
    let port = initialised
        .then(|| running_port(&binaries, &run_as, &data_dir))
        .flatten();
    let holders = if dir.exists() {
        let _lock = DirLock::take(&dir)?;
        live_holders(&dir)?
    } else {
        Vec::new()
    };
    Ok(Status {
        dir,
        initialised,
        port,
        holders,
    })
}

/// Stops the server of `dir`'s cluster. Refuses while live processes hold it unless `force`
/// (they would lose their database): [`Error::InUse`] names them.
pub fn stop_dir(dir: &Path, force: bool) -> Result<Stopped, Error> {
    let binaries = Binaries::locate()?;
    let run_as = RunAs::detect()?;
    let dir = resolved_dir(dir, &run_as)?;
    let data_dir = dir.join("data");
    if !data_dir.join("PG_VERSION").exists() {
        return Ok(Stopped::NotRunning);
    }
    let _lock = DirLock::take(&dir)?;
    let holders = live_holders(&dir)?;
    if !holders.is_empty() && !force {
        return Err(Error::InUse {
            dir,
            holders: holders
                .iter()
                .map(|h| match &h.command {
                    Some(c) => format!("{} ({c})", h.pid),
                    None => h.pid.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    if running_port(&binaries, &run_as, &data_dir).is_none() {
        return Ok(Stopped::NotRunning);
    }
    pg_ctl_stop(&binaries, &run_as, &data_dir)?;
    Ok(Stopped::Stopped)
}

/// `dir` as [`Cluster::start`] resolves it, but creating nothing: through the
/// `/var/lib/wharf/clusters` link when there is one.
fn resolved_dir(dir: &Path, run_as: &RunAs) -> Result<PathBuf, Error> {
    let absolute = std::path::absolute(dir).map_err(io_err("cannot resolve", dir))?;
    if matches!(run_as, RunAs::Postgres { .. })
        && let Ok(target) = fs::read_link(&absolute)
    {
        return Ok(target);
    }
    Ok(fs::canonicalize(&absolute).unwrap_or(absolute))
}

/// An exclusive `flock` on `dir/lock`, released when dropped (or when the process dies, which
/// is why a lock file and not a lock directory: a killed holder never leaves it taken).
struct DirLock {
    _file: fs::File,
}

impl DirLock {
    fn take(dir: &Path) -> Result<DirLock, Error> {
        use std::os::fd::AsRawFd;
        let path = dir.join("lock");
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err("cannot open", &path))?;
        loop {
            // SAFETY: flock takes a file descriptor we own for the duration of the call.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(DirLock { _file: file });
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(Error::Io {
                    what: "cannot lock",
                    path,
                    source: e,
                });
            }
        }
    }
}

/// Holder files of one process are numbered, so a process holding the cluster twice (two
/// [`Cluster`] values) leaves it only when both are gone.
static NEXT_HOLDER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Registers this process as a holder; call with the [`DirLock`] taken.
fn add_holder(dir: &Path) -> Result<PathBuf, Error> {
    let holders = dir.join("holders");
    fs::create_dir_all(&holders).map_err(io_err("cannot create", &holders))?;
    let pid = std::process::id();
    let n = NEXT_HOLDER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = holders.join(format!("{pid}-{n}"));
    let started = process_start(pid).unwrap_or_default();
    fs::write(&path, started).map_err(io_err("cannot write", &path))?;
    Ok(path)
}

/// The live holders, one per process, after removing the files of processes that are gone;
/// call with the [`DirLock`] taken.
fn live_holders(dir: &Path) -> Result<Vec<Holder>, Error> {
    let holders = dir.join("holders");
    let entries = match fs::read_dir(&holders) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Error::Io {
                what: "cannot read",
                path: holders,
                source: e,
            });
        }
    };
    let mut live: Vec<Holder> = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name.split('-').next().and_then(|p| p.parse::<u32>().ok());
        let recorded = fs::read_to_string(&path).unwrap_or_default();
        let alive = pid.is_some_and(|pid| {
            process_alive(pid)
                // A recycled pid is another process: compare start times where /proc has them.
                && (recorded.is_empty()
                    || process_start(pid).is_none_or(|now| now == recorded))
        });
        match pid {
            Some(pid) if alive => {
                if !live.iter().any(|h| h.pid == pid) {
                    live.push(Holder {
                        pid,
                        command: process_command(pid),
                    });
                }
            }
            _ => {
                let _ = fs::remove_file(&path);
            }
        }
    }
    live.sort_by_key(|h| h.pid);
    Ok(live)
}

fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The process's start time in clock ticks since boot (`/proc/<pid>/stat`, field 22), which
/// with the pid names one process for the machine's uptime.
fn process_start(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19).map(str::to_owned)
}

fn process_command(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let parts: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::warn!(error = %e, "stopping PostgreSQL failed");
        }
    }
}

/// Where the cluster really lives. As root, the server runs as `postgres`, which must be able
/// to enter every directory above the cluster. A checkout under `/root` (mode 0700) is not
/// enterable, so the cluster then lives under `/var/lib/wharf/clusters/<digest>` and `dir`
/// becomes a symlink to it: still kept between runs, still found from the same `--data-dir`.
fn reachable_dir(dir: &Path, run_as: &RunAs) -> Result<PathBuf, Error> {
    let RunAs::Postgres { uid, .. } = run_as else {
        return Ok(dir.to_owned());
    };
    let absolute = std::path::absolute(dir).map_err(io_err("cannot resolve", dir))?;
    if let Ok(target) = fs::read_link(&absolute) {
        return Ok(target);
    }
    let blocked = absolute.ancestors().skip(1).any(|ancestor| {
        fs::metadata(ancestor)
            .map(|m| m.uid() != *uid && m.permissions().mode() & 0o001 == 0)
            .unwrap_or(false)
    });
    if !blocked {
        return Ok(absolute);
    }
    let digest = fnv(absolute.as_os_str().as_encoded_bytes());
    let target = PathBuf::from(format!("/var/lib/wharf/clusters/{digest:016x}"));
    fs::create_dir_all(&target).map_err(io_err("cannot create", &target))?;
    for ancestor in ["/var/lib/wharf", "/var/lib/wharf/clusters"] {
        let _ = fs::set_permissions(ancestor, fs::Permissions::from_mode(0o755));
    }
    if let Some(parent) = absolute.parent() {
        fs::create_dir_all(parent).map_err(io_err("cannot create", parent))?;
    }
    // An empty directory left by an earlier attempt may stand where the link goes.
    let _ = fs::remove_dir(&absolute);
    std::os::unix::fs::symlink(&target, &absolute)
        .map_err(io_err("cannot link the cluster directory", &absolute))?;
    tracing::info!(
        link = %absolute.display(),
        cluster = %target.display(),
        "the postgres user cannot enter the data directory's parents; the cluster lives elsewhere"
    );
    Ok(target)
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

fn init(
    binaries: &Binaries,
    run_as: &RunAs,
    data_dir: &Path,
    password: &str,
    ephemeral: bool,
) -> Result<(), Error> {
    if data_dir.exists() {
        let empty = fs::read_dir(data_dir)
            .map_err(io_err("cannot read", data_dir))?
            .next()
            .is_none();
        if !empty {
            return Err(Error::NotACluster {
                path: data_dir.to_owned(),
            });
        }
    } else {
        fs::create_dir_all(data_dir).map_err(io_err("cannot create", data_dir))?;
    }
    check_owner_or_hand_over(data_dir, run_as)?;
    fs::set_permissions(data_dir, fs::Permissions::from_mode(0o700))
        .map_err(io_err("cannot restrict", data_dir))?;

    // initdb reads the password from a file; the server user must be able to read it.
    let pwfile = data_dir
        .parent()
        .unwrap_or(data_dir)
        .join(".initdb-password");
    write_private(&pwfile, password)?;
    run_as.hand_over(&pwfile)?;
    let mut cmd = run_as.command(&binaries.program("initdb"));
    cmd.arg("-D")
        .arg(data_dir)
        .args([
            "-U",
            SUPERUSER,
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C",
        ])
        .arg(format!("--pwfile={}", pwfile.display()));
    if ephemeral {
        cmd.arg("--no-sync");
    }
    let result = run(cmd, "initdb");
    let _ = fs::remove_file(&pwfile);
    result
}

fn check_owner_or_hand_over(path: &Path, run_as: &RunAs) -> Result<(), Error> {
    let meta = fs::metadata(path).map_err(io_err("cannot inspect", path))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() == me && me != run_as.uid() {
        // We (root) just made it: hand it over.
        run_as.hand_over(path)
    } else {
        check_owner(path, run_as.uid())
    }
}

fn check_owner(path: &Path, expected: u32) -> Result<(), Error> {
    let found = fs::metadata(path)
        .map_err(io_err("cannot inspect", path))?
        .uid();
    if found == expected {
        Ok(())
    } else {
        Err(Error::ForeignOwner {
            path: path.to_owned(),
            found,
            expected,
        })
    }
}

fn socket_dir(dir: &Path) -> Result<PathBuf, Error> {
    let preferred = dir.join("run");
    if preferred.as_os_str().len() <= SOCKET_DIR_BYTES_MAX {
        return Ok(preferred);
    }
    // Too long for a Unix socket path: use a short private directory instead.
    let digest = fnv(dir.as_os_str().as_encoded_bytes());
    Ok(std::env::temp_dir().join(format!("wharf-pg-{digest:016x}")))
}

fn free_port(data_dir: &Path) -> Result<u16, Error> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(io_err("cannot find a free port for", data_dir))?;
    let port = listener
        .local_addr()
        .map_err(io_err("cannot find a free port for", data_dir))?
        .port();
    Ok(port)
}

/// The port of a server already running for `data_dir`, if there is one.
fn running_port(binaries: &Binaries, run_as: &RunAs, data_dir: &Path) -> Option<u16> {
    let mut cmd = run_as.command(&binaries.program("pg_ctl"));
    cmd.arg("status").arg("-D").arg(data_dir);
    let status = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    // postmaster.pid: line 4 is the port (see PostgreSQL's pidfile.h).
    let pidfile = fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    pidfile.lines().nth(3)?.trim().parse().ok()
}

/// The server's command-line options: where it listens and every `-c` setting.
fn server_options(socket_dir: &Path, port: u16, options: &Options) -> OsString {
    let mut server_options = format!("-p {port} -h 127.0.0.1 -k {}", quote(socket_dir));
    for (name, value) in &options.settings {
        let _ = write!(server_options, " -c {name}={value}");
    }
    OsString::from(server_options)
}

fn start_server(
    binaries: &Binaries,
    run_as: &RunAs,
    data_dir: &Path,
    socket_dir: &Path,
    port: u16,
    options: &Options,
) -> Result<(), Error> {
    let mut cmd = run_as.command(&binaries.program("pg_ctl"));
    cmd.arg("start")
        .arg("-D")
        .arg(data_dir)
        .arg("-l")
        .arg(data_dir.join("wharf-server.log"))
        .args(["-w", "-t"])
        .arg(PG_CTL_WAIT_SECONDS.to_string())
        .arg("-o")
        .arg(server_options(socket_dir, port, options));
    run(cmd, "pg_ctl start").map_err(|e| match e {
        Error::Program {
            program,
            status,
            output,
        } => {
            let log = fs::read_to_string(data_dir.join("wharf-server.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Error::Program {
                program,
                status,
                output: format!("{output}\nserver log:\n{}", tail.join("\n")),
            }
        }
        other => other,
    })
}

fn run(mut cmd: Command, program: &str) -> Result<(), Error> {
    // Run from / so that a working directory the server user cannot read does not matter.
    let output = cmd
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Io {
            what: "cannot run",
            path: PathBuf::from(program),
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    let stdout = String::from_utf8_lossy(&output.stdout);
    if text.is_empty() {
        text = stdout.trim().to_owned();
    }
    Err(Error::Program {
        program: program.to_owned(),
        status: output.status.to_string(),
        output: text,
    })
}

fn write_private(path: &Path, contents: &str) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err("cannot write", path))?;
    file.write_all(contents.as_bytes())
        .map_err(io_err("cannot write", path))
}

fn random_password() -> String {
    let mut bytes = [0u8; 24];
    // /dev/urandom is always there on the systems PostgreSQL's packages support.
    if let Ok(mut f) = fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut bytes);
    }
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binaries_name_the_package_and_the_alternative() {
        let empty = tempfile::tempdir().unwrap();
        let err = Binaries::locate_in(&[empty.path().to_owned()]).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::NotInstalled { .. }), "{err:?}");
        assert!(text.contains("apt-get install postgresql"), "{text}");
        assert!(text.contains("--database-url"), "{text}");
        assert!(text.contains("DATABASE_URL"), "{text}");
    }

    #[test]
    fn a_directory_owned_by_someone_else_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let mine = fs::metadata(dir.path()).unwrap().uid();
        let err = check_owner(dir.path(), mine + 1).unwrap_err();
        assert!(matches!(err, Error::ForeignOwner { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("--data-dir"), "{text}");
        assert!(text.contains("chown"), "{text}");
        check_owner(dir.path(), mine).unwrap();
    }

    #[test]
    fn a_non_empty_directory_without_a_cluster_is_not_overwritten() {
        let Ok(binaries) = Binaries::locate() else {
            // Without PostgreSQL, init cannot be reached; the NotInstalled test covers that.
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        fs::create_dir(&data).unwrap();
        fs::write(data.join("precious.txt"), "keep me").unwrap();
        let err = init(&binaries, &RunAs::detect().unwrap(), &data, "pw", true).unwrap_err();
        assert!(matches!(err, Error::NotACluster { .. }), "{err:?}");
        assert_eq!(
            fs::read_to_string(data.join("precious.txt")).unwrap(),
            "keep me"
        );
    }

    #[test]
    fn a_cluster_without_its_password_file_is_refused_with_the_fix() {
        let Ok(binaries) = Binaries::locate() else {
            // Without PostgreSQL, start cannot be reached; the NotInstalled test covers that.
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("data")).unwrap();
        fs::write(dir.path().join("data/PG_VERSION"), "15\n").unwrap();
        let err = Cluster::start_with(binaries, &Options::durable(dir.path())).unwrap_err();
        assert!(matches!(err, Error::PasswordMissing { .. }), "{err:?}");
        assert!(err.to_string().contains("--database-url"), "{err}");
        assert_eq!(
            fs::read_to_string(dir.path().join("data/PG_VERSION")).unwrap(),
            "15\n",
            "the cluster was touched"
        );
    }

    #[test]
    fn long_directories_get_a_short_socket_path() {
        let long = PathBuf::from(format!("/tmp/{}", "x".repeat(120)));
        let socket = socket_dir(&long).unwrap();
        assert!(
            socket.as_os_str().len() <= SOCKET_DIR_BYTES_MAX,
            "{socket:?}"
        );
        assert_eq!(
            socket_dir(Path::new("/tmp/a")).unwrap(),
            Path::new("/tmp/a/run")
        );
    }

    #[test]
    fn user_lookup_reads_passwd() {
        assert_eq!(lookup_user("root"), Some((0, 0)));
        assert_eq!(lookup_user("no-such-user-wharf"), None);
    }
}
