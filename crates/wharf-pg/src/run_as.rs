//! Who runs the server, and where that user can reach its cluster. As root (where `initdb`
//! refuses to run), every PostgreSQL program runs as the `postgres` system user through
//! `runuser`, the directories it needs are handed to it, and a cluster directory it cannot enter
//! moves under `/var/lib/wharf/clusters/` with a symlink where it was asked for.
//!
//! Owns: [`RunAs`], the `postgres` user's lookup, the ownership checks, and where a cluster
//! directory really lives. Must not know: which programs are run, nor what is in the cluster.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::binaries::is_executable;
use crate::error::io_err;
use crate::{Error, fnv};

/// Who runs the server: the current user, or (when we are root) the `postgres` user via runuser.
#[derive(Debug, Clone)]
pub(crate) enum RunAs {
    Me,
    Postgres {
        uid: u32,
        gid: u32,
        runuser: PathBuf,
    },
}

impl RunAs {
    pub(crate) fn detect() -> Result<RunAs, Error> {
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

    pub(crate) fn uid(&self) -> u32 {
        match self {
            // SAFETY: geteuid has no preconditions and cannot fail.
            RunAs::Me => unsafe { libc::geteuid() },
            RunAs::Postgres { uid, .. } => *uid,
        }
    }

    pub(crate) fn command(&self, program: &Path) -> Command {
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
    pub(crate) fn hand_over(&self, path: &Path) -> Result<(), Error> {
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

/// Where the cluster really lives. As root, the server runs as `postgres`, which must be able
/// to enter every directory above the cluster. A checkout under `/root` (mode 0700) is not
/// enterable, so the cluster then lives under `/var/lib/wharf/clusters/<digest>` and `dir`
/// becomes a symlink to it: still kept between runs, still found from the same `--data-dir`.
pub(crate) fn reachable_dir(dir: &Path, run_as: &RunAs) -> Result<PathBuf, Error> {
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

/// `dir` as [`Cluster::start`](crate::Cluster::start) resolves it, but creating nothing:
/// through the `/var/lib/wharf/clusters` link when there is one.
pub(crate) fn resolved_dir(dir: &Path, run_as: &RunAs) -> Result<PathBuf, Error> {
    let absolute = std::path::absolute(dir).map_err(io_err("cannot resolve", dir))?;
    if matches!(run_as, RunAs::Postgres { .. })
        && let Ok(target) = fs::read_link(&absolute)
    {
        return Ok(target);
    }
    Ok(fs::canonicalize(&absolute).unwrap_or(absolute))
}

pub(crate) fn check_owner_or_hand_over(path: &Path, run_as: &RunAs) -> Result<(), Error> {
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

pub(crate) fn check_owner(path: &Path, expected: u32) -> Result<(), Error> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn user_lookup_reads_passwd() {
        assert_eq!(lookup_user("root"), Some((0, 0)));
        assert_eq!(lookup_user("no-such-user-wharf"), None);
    }
}
