//! The PostgreSQL programs, run: `initdb` for a new cluster (with its superuser's password),
//! `pg_ctl start` on a private Unix socket and 127.0.0.1 on a free port, `pg_ctl status` for a
//! server already running, `pg_ctl stop`; and how a failed program's output becomes an error.
//!
//! Owns: every command line given to a PostgreSQL program, the socket directory, the password
//! file's contents. Must not know: who else holds the server (the holders), nor when to start or
//! stop it (the cluster decides).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::io_err;
use crate::run_as::{RunAs, check_owner_or_hand_over};
use crate::{Binaries, Error, Options, SUPERUSER, fnv, quote};

/// Unix socket paths are limited to 107 bytes; leave room for `/.s.PGSQL.NNNNN`.
const SOCKET_DIR_BYTES_MAX: usize = 80;

/// How long `pg_ctl` may wait for a start or stop. A cold start on a busy 2-core machine takes
/// about a second; 60 s only matters when something is really wrong.
pub(crate) const PG_CTL_WAIT_SECONDS: u32 = 60;

pub(crate) fn init(
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

pub(crate) fn socket_dir(dir: &Path) -> Result<PathBuf, Error> {
    let preferred = dir.join("run");
    if preferred.as_os_str().len() <= SOCKET_DIR_BYTES_MAX {
        return Ok(preferred);
    }
    // Too long for a Unix socket path: use a short private directory instead.
    let digest = fnv(dir.as_os_str().as_encoded_bytes());
    Ok(std::env::temp_dir().join(format!("wharf-pg-{digest:016x}")))
}

pub(crate) fn free_port(data_dir: &Path) -> Result<u16, Error> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(io_err("cannot find a free port for", data_dir))?;
    let port = listener
        .local_addr()
        .map_err(io_err("cannot find a free port for", data_dir))?
        .port();
    Ok(port)
}

/// The port of a server already running for `data_dir`, if there is one.
pub(crate) fn running_port(binaries: &Binaries, run_as: &RunAs, data_dir: &Path) -> Option<u16> {
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
pub(crate) fn server_options(socket_dir: &Path, port: u16, options: &Options) -> OsString {
    let mut server_options = format!("-p {port} -h 127.0.0.1 -k {}", quote(socket_dir));
    for (name, value) in &options.settings {
        let _ = write!(server_options, " -c {name}={value}");
    }
    OsString::from(server_options)
}

pub(crate) fn start_server(
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

pub(crate) fn pg_ctl_stop(
    binaries: &Binaries,
    run_as: &RunAs,
    data_dir: &Path,
) -> Result<(), Error> {
    let mut cmd = run_as.command(&binaries.program("pg_ctl"));
    cmd.arg("stop")
        .arg("-D")
        .arg(data_dir)
        .args(["-m", "fast", "-w", "-t"])
        .arg(PG_CTL_WAIT_SECONDS.to_string());
    run(cmd, "pg_ctl stop")
}

pub(crate) fn run(mut cmd: Command, program: &str) -> Result<(), Error> {
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

pub(crate) fn write_private(path: &Path, contents: &str) -> Result<(), Error> {
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

pub(crate) fn random_password() -> String {
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
}
