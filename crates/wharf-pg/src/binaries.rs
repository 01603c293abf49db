//! Finding PostgreSQL's server programs: `WHARF_PG_BIN_DIR`, then PATH, then the usual install
//! directories, newest major version first.
//!
//! Owns: [`Binaries`] and what counts as an installation (`initdb`, `pg_ctl` and `postgres`
//! executable in one directory). Must not know: who runs them or what they are run on.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::Error;

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

    pub(crate) fn program(&self, name: &str) -> PathBuf {
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

pub(crate) fn is_executable(path: &Path) -> bool {
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
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
}
