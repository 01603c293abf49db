//! The one error type of the crate: why a cluster could not be found, created, started or
//! stopped, each variant saying whether retrying can help.
//!
//! Owns: [`Error`] and the small adapter every file-system call maps its `io::Error` through.
//! Must not know: which step failed beyond what a variant carries.

use std::io;
use std::path::{Path, PathBuf};

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

/// Maps an `io::Error` of `what` on `path` to [`Error::Io`].
pub(crate) fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io {
        what,
        path: path.to_owned(),
        source,
    }
}
