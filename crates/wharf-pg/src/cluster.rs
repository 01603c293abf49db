//! A cluster's life as the crate's users see it: [`Cluster::start`] creates, starts, joins or
//! adopts the server of a directory, and stopping or dropping the value leaves it, the last
//! holder out stopping the server; [`status`] and [`stop_dir`] look at and stop a directory's
//! server from outside.
//!
//! Owns: the order of the steps (resolve the directory, create the cluster, then join or start
//! under the lock), [`Options`], the watchdog of an ephemeral cluster, the crash restart for
//! fault injection. Must not know: how a program is invoked or a holder recorded — `server`
//! and `holders` do that.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::io_err;
use crate::holders::{DirLock, add_holder, live_holders};
use crate::run_as::{RunAs, check_owner, reachable_dir, resolved_dir};
use crate::server::{
    PG_CTL_WAIT_SECONDS, free_port, init, pg_ctl_stop, random_password, run, running_port,
    server_options, socket_dir, start_server, write_private,
};
use crate::{Binaries, Error, Holder, SUPERUSER, quote};

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

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::warn!(error = %e, "stopping PostgreSQL failed");
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
