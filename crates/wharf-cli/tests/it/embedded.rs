//! The embedded PostgreSQL shared by several real `wharf` processes on one data dir: the last
//! one out stops it, a cluster a killed process left running is adopted and stopped, and
//! `wharf db status|stop` say and do the right thing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{Log, Server, http, postgres_process_under, postgres_running_under, wharf};

/// Where the cluster of `cwd` really lives (as root, often under /var/lib/wharf/clusters).
fn cluster_of(cwd: &Path) -> PathBuf {
    std::fs::canonicalize(cwd.join(".wharf/pg")).unwrap()
}

/// Removes a cluster the temporary directory does not contain (it is not removed with it).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = wharf()
            .current_dir(&self.0)
            .args(["db", "stop", "--force"])
            .output();
        if let Ok(dir) = std::fs::canonicalize(self.0.join(".wharf/pg"))
            && dir.starts_with("/var/lib/wharf/clusters")
        {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn run(cwd: &Path, args: &[&str]) -> (bool, String, String) {
    let out = wharf().current_dir(cwd).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn ready(server: &Server) -> u16 {
    http()
        .get(format!("{}/readyz", server.base))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

#[tokio::test]
async fn two_servers_share_the_cluster_and_the_last_one_out_stops_it() {
    let cwd = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(cwd.path().to_owned());
    let first = Server::start(cwd.path(), &[], &[]).await;
    let second = Server::start(cwd.path(), &[], &[]).await;
    let cluster = cluster_of(cwd.path());
    second
        .log
        .wait_for(
            &["joining the embedded PostgreSQL other wharf processes use"],
            10_000,
        )
        .await;

    let (ok, stdout, stderr) = run(cwd.path(), &["db", "status"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("runs on 127.0.0.1:"), "{stdout}");
    for pid in [first.child.id(), second.child.id()] {
        assert!(stdout.contains(&pid.to_string()), "{pid} not in {stdout}");
    }

    // The first one out leaves it running: the second keeps its database.
    let log = first.interrupt();
    assert!(
        log.contains("leaving the embedded PostgreSQL running"),
        "{log}"
    );
    assert!(
        postgres_process_under(&cluster),
        "the first one out stopped it"
    );
    assert_eq!(ready(&second).await, 200, "{}", second.log.text());

    second.interrupt();
    assert!(
        !postgres_running_under(&cluster),
        "the last one out did not stop it"
    );
}

#[tokio::test]
async fn a_cluster_left_by_a_killed_server_is_adopted_and_stopped() {
    let cwd = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(cwd.path().to_owned());
    let mut server = Server::start(cwd.path(), &[], &[]).await;
    let cluster = cluster_of(cwd.path());
    server.child.kill().unwrap(); // SIGKILL: no clean-up runs
    server.child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(postgres_process_under(&cluster), "nothing was orphaned");

    let (ok, stdout, stderr) = run(cwd.path(), &["db", "status"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("used by no wharf process"), "{stdout}");

    // The next command adopts it, and as the last one out stops it.
    let (ok, _, stderr) = run(cwd.path(), &["tenant", "list"]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("adopting the embedded PostgreSQL"),
        "{stderr}"
    );
    assert!(
        !postgres_running_under(&cluster),
        "the adopter left it running"
    );
}

#[tokio::test]
async fn db_stop_refuses_while_a_server_uses_it_and_stops_an_orphan() {
    let cwd = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(cwd.path().to_owned());
    let mut server = Server::start(cwd.path(), &[], &[]).await;
    let cluster = cluster_of(cwd.path());

    let (ok, _, stderr) = run(cwd.path(), &["db", "stop"]);
    assert!(!ok, "stopped under a running server");
    assert!(
        stderr.contains("is in use by wharf process(es)")
            && stderr.contains(&server.child.id().to_string())
            && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(ready(&server).await, 200, "the refused stop touched it");

    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let (ok, stdout, stderr) = run(cwd.path(), &["db", "stop"]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("stopped the embedded PostgreSQL"),
        "{stdout}"
    );
    assert!(!postgres_running_under(&cluster));
    let (ok, stdout, _) = run(cwd.path(), &["db", "status"]);
    assert!(ok);
    assert!(stdout.contains("is stopped"), "{stdout}");
}

#[test]
fn db_refuses_a_configured_database_url() {
    let cwd = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = run(
        cwd.path(),
        &[
            "db",
            "status",
            "--database-url",
            "postgres://u@127.0.0.1:1/x",
        ],
    );
    assert!(!ok);
    assert!(
        stderr.contains("manages the embedded PostgreSQL"),
        "{stderr}"
    );
}

/// A `wharf work` replica on the data dir of a running `serve` joins its cluster; when `serve`
/// stops, the worker keeps its database (it is still registered), and the last one out stops it.
#[tokio::test]
async fn a_worker_shares_the_cluster_of_a_server_and_keeps_it_when_the_server_stops() {
    let cwd = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(cwd.path().to_owned());
    let server = Server::start(cwd.path(), &[], &[]).await;
    let cluster = cluster_of(cwd.path());
    let mut worker = wharf()
        .current_dir(cwd.path())
        .arg("work")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let log = Log::collect(worker.stderr.take().unwrap());
    log.wait_for(
        &[
            "joining the embedded PostgreSQL other wharf processes use",
            "wharf working",
        ],
        30_000,
    )
    .await;
    let (ok, stdout, stderr) = run(cwd.path(), &["db", "status"]);
    assert!(ok, "{stderr}");
    for pid in [server.child.id(), worker.id()] {
        assert!(stdout.contains(&pid.to_string()), "{pid} not in {stdout}");
    }

    let out = server.interrupt();
    assert!(
        out.contains("leaving the embedded PostgreSQL running"),
        "{out}"
    );
    assert!(
        postgres_process_under(&cluster),
        "serve stopped it under the worker"
    );
    // The worker runs on, registered as the cluster's one user now.
    let (ok, stdout, stderr) = run(cwd.path(), &["db", "status"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains(&worker.id().to_string()), "{stdout}");
    assert!(worker.try_wait().unwrap().is_none(), "{}", log.text());

    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(worker.id() as i32, libc::SIGTERM);
    }
    let status = tokio::task::spawn_blocking(move || worker.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}: {}", log.text());
    assert!(
        !postgres_running_under(&cluster),
        "the last one out did not stop it"
    );
}
