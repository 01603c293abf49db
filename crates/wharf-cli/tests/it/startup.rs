//! `wharf work` and `wharf serve` wait for a database that is not there yet (issue 11, defect
//! 2): real processes, a port where nothing listens, then one that resets every connection,
//! then a real PostgreSQL behind it; and the Prometheus histograms (defect 7).

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Forwarder, Forwarding, Log, Server, free_port, http, repoint, wharf};

/// An email action written as an application would, through SQL.
async fn enqueue_email(db: &wharf_testkit::TestDb, key: &str) {
    sqlx::query(
        "INSERT INTO wharf.action_live (kind, tenant_id, project_id, lane_key, idempotency_key,
                                   content_digest, at_most_once, instance_level, state,
                                   max_attempts, payload, run_at)
         VALUES ('email', NULL, NULL, $1, $1, sha256($1::bytea), true, true, 'ADMITTED', 2,
                 '{\"notice\":\"message\",\"event\":{\"to\":\"ada@example.org\",
                   \"subject\":\"Hi\",\"text\":\"Hello\"}}'::jsonb, now())",
    )
    .bind(key)
    .execute(&db.pool)
    .await
    .unwrap();
}

async fn wait_done(db: &wharf_testkit::TestDb, key: &str) {
    let started = Instant::now();
    loop {
        let state: String =
            sqlx::query_scalar("SELECT state FROM wharf.action WHERE idempotency_key = $1")
                .bind(key)
                .fetch_one(&db.pool)
                .await
                .unwrap();
        if state == "DONE" {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{key} is still {state}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (20 s at most) until `needle` appears in the log twice more than it does now.
async fn two_more(log: &Log, needle: &str) {
    let before = log.text().matches(needle).count();
    let started = Instant::now();
    while log.text().matches(needle).count() < before + 2 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{}",
            log.text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn interrupt(child: &std::process::Child) {
    // SAFETY: kill has no memory-safety preconditions; the pid is our own child's.
    unsafe extern "C" {
        #[link_name = "kill"]
        fn libc_kill(pid: i32, signal: i32) -> i32;
    }
    unsafe {
        libc_kill(child.id() as i32, 2);
    }
}

// Multi-threaded: the forwarder's tasks must run while the test waits for the child to exit
// (its shutdown still talks to the database through them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_waits_for_a_database_that_comes_later_and_then_runs() {
    let db = wharf_testkit::TestDb::new().await;
    let port = free_port();
    let (url, upstream) = repoint(&db.url(), port);
    let data = tempfile::tempdir().unwrap();
    let mut child = wharf()
        .arg("work")
        .arg("--data-dir")
        .arg(data.path())
        .env("DATABASE_URL", &url)
        .env("WHARF_STARTUP__DEADLINE_MS", "120000")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Log::collect(child.stderr.take().unwrap());
    let target = format!("127.0.0.1:{port}");

    // Nothing listens: connection refused, logged with host and port, retried.
    log.wait_for(&["waiting for PostgreSQL", &target, "attempt=2"], 20_000)
        .await;
    assert!(child.try_wait().unwrap().is_none(), "{}", log.text());

    // Something listens and resets every connection, as a restarting server may.
    let forwarder = Forwarder::start(port, upstream, Forwarding::Reset).await;
    two_more(&log, "waiting for PostgreSQL").await;
    assert!(child.try_wait().unwrap().is_none(), "{}", log.text());

    // A connection that reads back its own bytes, as a self-connect to a port whose server is
    // down does (the fault suite saw it during restarts): retried, not taken for a wrong address.
    forwarder.set(Forwarding::Echo);
    two_more(&log, "SSLRequest").await;
    assert!(child.try_wait().unwrap().is_none(), "{}", log.text());

    // The database arrives: the worker migrates (nothing to do), starts, and runs an action.
    forwarder.set(Forwarding::Forward);
    log.wait_for(&["PostgreSQL answered", "wharf working"], 30_000)
        .await;
    enqueue_email(&db, "after-the-wait").await;
    wait_done(&db, "after-the-wait").await;

    interrupt(&child);
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}: {}", log.finish());
}

#[tokio::test]
async fn work_gives_up_at_its_start_up_deadline_naming_host_and_port() {
    let port = free_port();
    let data = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = wharf()
        .args(["work", "--startup-deadline-ms", "1500"])
        .arg("--data-dir")
        .arg(data.path())
        .env(
            "DATABASE_URL",
            format!("postgres://wharf:x@127.0.0.1:{port}/wharf"),
        )
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.contains("start-up deadline of 1500 ms"), "{stderr}");
    assert!(
        stderr.matches("waiting for PostgreSQL").count() >= 2,
        "{stderr}"
    );
    // The deadline bounds the wait (plus the process's own start and a last attempt).
    assert!(took < Duration::from_secs(15), "{took:?}");

    // A deadline past its bound is refused before any attempt.
    let out = wharf()
        .args(["work", "--startup-deadline-ms", "86400001"])
        .env("DATABASE_URL", "postgres://wharf:x@127.0.0.1:1/wharf")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("deadline_ms must be at most"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Something that is not PostgreSQL at the address answers the same way every time: reported
/// after a few attempts, long before the start-up deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_reports_a_peer_that_never_speaks_postgresql_after_a_few_attempts() {
    let port = free_port();
    let _echo = Forwarder::start(port, String::new(), Forwarding::Echo).await;
    let data = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        wharf()
            .args(["work", "--startup-deadline-ms", "600000"])
            .arg("--data-dir")
            .arg(data.path())
            .env(
                "DATABASE_URL",
                format!("postgres://wharf:x@127.0.0.1:{port}/wharf"),
            )
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let took = started.elapsed();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.contains("SSLRequest"), "{stderr}");
    assert_eq!(
        stderr.matches("waiting for PostgreSQL").count(),
        4,
        "four retries, then the fifth attempt's error: {stderr}"
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_healthz_and_is_not_ready_until_its_database_comes() {
    let db = wharf_testkit::TestDb::new().await;
    let port = free_port();
    let (url, upstream) = repoint(&db.url(), port);
    let cwd = tempfile::tempdir().unwrap();
    let server = Server::spawn_on(
        cwd.path(),
        free_port(),
        &["--operator-token", "op"],
        &[("DATABASE_URL", &url)],
    )
    .await;
    let target = format!("127.0.0.1:{port}");
    server
        .log
        .wait_for(&["waiting for PostgreSQL", &target], 20_000)
        .await;
    let client = http();
    for path in ["/readyz", "/v1/actions/1"] {
        let response = client
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 503, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "starting", "{body}");
        assert!(body["reason"].as_str().unwrap().contains(&target), "{body}");
    }

    let _forwarder = Forwarder::start(port, upstream, Forwarding::Forward).await;
    server.wait_for("/readyz").await;
    let body = serde_json::json!({
        "kind": "email", "lane_key": "email:ada", "idempotency_key": "late:ada",
        "payload": {"notice": "message", "event": {
            "to": "ada@example.org", "subject": "Hi", "text": "Hello"}}
    });
    let response = client
        .post(format!("{}/v1/actions", server.base))
        .bearer_auth("op")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    wait_done(&db, "late:ada").await;
    let log = tokio::task::spawn_blocking(move || server.interrupt())
        .await
        .unwrap();
    assert!(log.contains("wharf ready"), "{log}");
}

#[tokio::test]
async fn latency_metrics_are_histograms_with_buckets() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    let server = Server::start(cwd.path(), &[], &[("DATABASE_URL", &db.url())]).await;
    enqueue_email(&db, "measured").await;
    wait_done(&db, "measured").await;
    let text = http()
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "# TYPE wharf_claim_seconds histogram",
        "wharf_claim_seconds_bucket{le=\"0.0005\"}",
        "wharf_claim_seconds_bucket{le=\"+Inf\"}",
        "wharf_claim_seconds_count",
        "# TYPE wharf_execution_seconds histogram",
        "wharf_execution_seconds_bucket{kind=\"email\",le=\"120\"}",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
    assert!(!text.contains("summary"), "a summary is left:\n{text}");
    server.interrupt();
}
