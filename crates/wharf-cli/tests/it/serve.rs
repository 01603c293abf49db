//! `wharf serve` on the embedded PostgreSQL and on a given database URL.

use crate::support::{Server, postgres_running_under, wharf};

#[tokio::test]
async fn serve_creates_the_cluster_answers_health_reuses_it_and_leaves_nothing_running() {
    let cwd = tempfile::tempdir().unwrap();
    let first = Server::start(cwd.path(), &[], &[]).await;
    assert!(
        cwd.path().join(".wharf/pg").exists(),
        "./.wharf/pg was not created"
    );
    let data = std::fs::canonicalize(cwd.path().join(".wharf/pg")).unwrap();
    assert!(postgres_running_under(&data));
    let ready = crate::support::http()
        .get(format!("{}/readyz", first.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let log = first.interrupt();
    assert!(log.contains("reused=false"), "{log}");
    let version_file = data.join("data/PG_VERSION");
    let created = std::fs::metadata(&version_file)
        .unwrap()
        .modified()
        .unwrap();
    assert!(
        !postgres_running_under(&data),
        "postgres still runs after Ctrl-C"
    );

    // A second start finds the cluster it made and keeps its data.
    let second = Server::start(cwd.path(), &[], &[]).await;
    second.interrupt();
    assert!(
        !postgres_running_under(&data),
        "postgres still runs after Ctrl-C"
    );
    let still = std::fs::metadata(&version_file)
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(
        created, still,
        "the second start made a new cluster instead of reusing it"
    );
}

#[tokio::test]
async fn serve_uses_database_url_without_touching_the_data_dir() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    let server = Server::start(cwd.path(), &[], &[("DATABASE_URL", &db.url())]).await;
    let ready = crate::support::http()
        .get(format!("{}/readyz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    server.interrupt();
    assert!(
        !cwd.path().join(".wharf").exists(),
        "an embedded cluster was made anyway"
    );
}

#[test]
fn every_command_has_help() {
    for args in [
        &["--help"][..],
        &["serve", "--help"],
        &["migrate", "--help"],
        &["work", "--help"],
    ] {
        let out = wharf().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage"),
            "{args:?}"
        );
    }
}

#[test]
fn a_bad_database_url_fails_with_a_clear_message_and_nonzero_exit() {
    let out = wharf()
        .args(["migrate", "--database-url", "not a url"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a valid PostgreSQL URL"), "{stderr}");
}
