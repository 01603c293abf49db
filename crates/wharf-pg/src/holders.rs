//! Sharing one server between processes: an exclusive `flock` on `dir/lock` around every join,
//! leave and stop, and one holder file per live [`Cluster`](crate::Cluster) value under
//! `dir/holders/`, named by pid and holding the process's start time, so the files of a process
//! that is gone (SIGKILL, a crash, a recycled pid) are told apart and pruned.
//!
//! Owns: [`DirLock`], the holder files, what counts as a live holder. Must not know: how the
//! server is started or stopped — the cluster decides that from the holders it is given.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::Error;
use crate::error::io_err;

/// A live process that holds a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its process id.
    pub pid: u32,
    /// Its command line, space-joined, when `/proc` shows it.
    pub command: Option<String>,
}

/// An exclusive `flock` on `dir/lock`, released when dropped (or when the process dies, which
/// is why a lock file and not a lock directory: a killed holder never leaves it taken).
pub(crate) struct DirLock {
    _file: fs::File,
}

impl DirLock {
    pub(crate) fn take(dir: &Path) -> Result<DirLock, Error> {
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
/// [`Cluster`](crate::Cluster) values) leaves it only when both are gone.
static NEXT_HOLDER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Registers this process as a holder; call with the [`DirLock`] taken.
pub(crate) fn add_holder(dir: &Path) -> Result<PathBuf, Error> {
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
pub(crate) fn live_holders(dir: &Path) -> Result<Vec<Holder>, Error> {
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
