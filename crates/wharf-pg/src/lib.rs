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
//!
//! Modules, one thing each: `binaries` (finding the programs), `run_as` (who runs them, and where
//! that user can reach the cluster), `server` (the PostgreSQL programs run: `initdb`, `pg_ctl`
//! start, status and stop), `holders` (the lock and the holder files that share one server
//! between processes), `cluster` (the public [`Cluster`] that ties them together, [`status`],
//! [`stop_dir`]), `error`.

mod binaries;
mod cluster;
mod error;
mod holders;
mod run_as;
mod server;

use std::path::Path;

pub use binaries::Binaries;
pub use cluster::{Cluster, Joined, Options, Status, Stopped, status, stop_dir};
pub use error::Error;
pub use holders::Holder;

/// The superuser role every wharf cluster is created with.
pub const SUPERUSER: &str = "wharf";

/// FNV-1a of `bytes`: a short stable name for a path (the cluster's place under
/// `/var/lib/wharf/clusters`, a socket directory too long for its own place), not a security
/// digest.
pub(crate) fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `path` quoted for `/bin/sh` and for `postgres -o`.
pub(crate) fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}
