//! What a new user meets in the first hour: a strict configuration file, admin commands on a
//! fresh data dir or an unmigrated database, `wharf migrate` saying what it did, errors that
//! say what to do (once), `wharf emit` refusing a destination nobody configured, and a server
//! without an operator token saying so.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::{Server, free_port, http, wharf};

fn run_in(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut cmd = wharf();
    cmd.current_dir(cwd).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unknown_top_level_keys_tables_and_variables_are_refused_by_name() {
    let cwd = tempfile::tempdir().unwrap();
    let config = cwd.path().join("wharf.toml");
    for (text, expected) in [
        (
            "log_fromat = \"json\"\n",
            "wharf.toml: unknown top-level key `log_fromat` (did you mean `log_format`?)",
        ),
        (
            "[emial]\nrelay_host = \"smtp.example.org\"\n",
            "wharf.toml: unknown table `[emial]` (did you mean `[email]`?)",
        ),
        ("data_dir = 7\n", "`data_dir` must be a string"),
    ] {
        std::fs::write(&config, text).unwrap();
        // Refused before anything else happens: no database is even looked for.
        let (ok, _, stderr) = run_in(cwd.path(), &["migrate"], &[]);
        assert!(!ok, "{text} was accepted");
        assert!(stderr.contains(expected), "{text}: {stderr}");
        assert!(
            !cwd.path().join(".wharf").exists(),
            "{text}: a data dir was made"
        );
    }
    std::fs::remove_file(&config).unwrap();
    let (ok, _, stderr) = run_in(
        cwd.path(),
        &["migrate"],
        &[("WHARF_EMIAL__RELAY_HOST", "smtp.example.org")],
    );
    assert!(!ok);
    assert!(
        stderr.contains("WHARF_EMIAL__RELAY_HOST")
            && stderr.contains("did you mean WHARF_EMAIL__RELAY_HOST?"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_unmigrated_database_says_run_wharf_migrate_and_migrate_says_what_it_did() {
    let db = wharf_testkit::TestDb::new().await;
    sqlx::query("DROP SCHEMA wharf CASCADE")
        .execute(&db.pool)
        .await
        .unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let url = db.url();
    let env = [("DATABASE_URL", url.as_str())];

    let (ok, _, stderr) = run_in(cwd.path(), &["tenant", "list"], &env);
    assert!(!ok);
    assert!(
        stderr.contains("has no wharf schema yet: run `wharf migrate`"),
        "{stderr}"
    );
    assert!(!stderr.contains("does not exist"), "{stderr}");

    let (ok, stdout, stderr) = run_in(cwd.path(), &["migrate"], &env);
    assert!(ok, "{stderr}");
    let total = wharf::migrate::migrator().iter().count();
    assert!(
        stdout.contains(&format!("applied {total} migration(s): 0001_schema")),
        "{stdout}"
    );
    let (ok, stdout, _) = run_in(cwd.path(), &["migrate"], &env);
    assert!(ok);
    assert!(
        stdout.contains(&format!(
            "schema up to date ({total} migrations); nothing to apply"
        )),
        "{stdout}"
    );

    // One migration short: older than this binary, and it says which.
    let last = wharf::migrate::migrator().iter().last().unwrap().version;
    sqlx::query("DELETE FROM wharf._sqlx_migrations WHERE version = $1")
        .bind(last)
        .execute(&db.pool)
        .await
        .unwrap();
    let (ok, _, stderr) = run_in(cwd.path(), &["tenant", "list"], &env);
    assert!(!ok);
    assert!(
        stderr.contains("is older than this wharf (1 migration(s) not applied: ")
            && stderr.contains("run `wharf migrate`"),
        "{stderr}"
    );
}

#[test]
fn an_admin_command_on_a_fresh_data_dir_just_works() {
    let cwd = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = run_in(cwd.path(), &["tenant", "create", "acme"], &[]);
    let cluster = std::fs::canonicalize(cwd.path().join(".wharf/pg")).ok();
    if let Some(dir) = cluster
        .as_ref()
        .filter(|d| d.starts_with("/var/lib/wharf/clusters"))
    {
        let _ = std::fs::remove_dir_all(dir);
    }
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("created tenant acme"), "{stdout}");
    // An admin command prints its answer; the cluster's comings and goings stay at info.
    assert!(!stderr.contains("INFO"), "{stderr}");
}

#[test]
fn nothing_listening_is_said_at_once_and_once() {
    let cwd = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("postgres://wharf@127.0.0.1:{port}/wharf");
    let started = Instant::now();
    let (ok, _, stderr) = run_in(cwd.path(), &["tenant", "list", "--database-url", &url], &[]);
    assert!(!ok);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let target = format!("127.0.0.1:{port}");
    assert!(
        stderr.contains(&target) && stderr.to_lowercase().contains("connection refused"),
        "{stderr}"
    );
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_default();
    assert_eq!(
        error.to_lowercase().matches("connection refused").count(),
        1,
        "{error}"
    );
}

#[tokio::test]
async fn a_database_error_is_printed_once_without_postgres_source_lines() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    // A tenant table the command's query cannot read: the error comes from PostgreSQL.
    sqlx::query("ALTER TABLE wharf.inbox_tenants RENAME TO inbox_tenants_gone")
        .execute(&db.pool)
        .await
        .unwrap();
    let (ok, _, stderr) = run_in(
        cwd.path(),
        &["tenant", "list"],
        &[("DATABASE_URL", db.url().as_str())],
    );
    assert!(!ok);
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_default();
    assert_eq!(error.matches("does not exist").count(), 1, "{stderr}");
    assert!(!error.contains(" at line "), "{error}");
    assert!(error.contains("SQLSTATE 42P01"), "{error}");
}

#[tokio::test]
async fn emit_refuses_a_destination_no_entry_covers_and_enqueues_nothing() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    let payload = cwd.path().join("payload.json");
    std::fs::write(&payload, "{}").unwrap();
    let to = "http://127.0.0.1:9/v1/tenants/acme/projects/p1/envelopes";
    let (ok, _, stderr) = run_in(
        cwd.path(),
        &[
            "emit",
            "--tenant",
            "acme",
            "--project",
            "p1",
            "--event-type",
            "installation",
            "--payload",
            payload.to_str().unwrap(),
            "--idempotency-key",
            "k1",
            "--to",
            to,
        ],
        &[("DATABASE_URL", db.url().as_str())],
    );
    assert!(!ok);
    assert!(
        stderr.contains(&format!(
            "--to {to} matches no [[envelope.destinations]] entry"
        )) && stderr.contains("none is configured"),
        "{stderr}"
    );
    let actions: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.action")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(actions, 0);
}

#[tokio::test]
async fn a_server_without_an_operator_token_says_how_to_set_one() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    let server = Server::start(cwd.path(), &[], &[("DATABASE_URL", &db.url())]).await;
    server
        .log
        .wait_for(&["no operator token configured"], 10_000)
        .await;
    let response = http()
        .get(format!("{}/v1/actions/1", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let body: serde_json::Value = response.json().await.unwrap();
    let reason = body["reason"].as_str().unwrap();
    assert!(reason.contains("WHARF_OPERATOR_TOKEN"), "{reason}");

    // The request is logged at info with the correlation id the client was given.
    let correlation_id = body["correlation_id"].as_str().unwrap();
    let log = server
        .log
        .wait_for(&["http request", correlation_id], 10_000)
        .await;
    let line = log.lines().find(|l| l.contains(correlation_id)).unwrap();
    assert!(
        line.contains("INFO")
            && line.contains("method=\"GET\"")
            && line.contains("route=\"/v1/actions/{id}\"")
            && line.contains("status=401"),
        "{line}"
    );
    let metrics = http()
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for expected in [
        "# HELP wharf_http_requests_total",
        "wharf_http_requests_total{method=\"GET\",route=\"/v1/actions/{id}\",status=\"401\"} 1",
        "# HELP wharf_db_pool_connections_max",
        "wharf_build_info{version=",
    ] {
        assert!(metrics.contains(expected), "{expected} not in:\n{metrics}");
    }

    // A second server on the same port is refused with the likely cause.
    let listen = server.base.trim_start_matches("http://").to_owned();
    let (ok, _, stderr) = run_in(
        cwd.path(),
        &["serve", "--listen", &listen],
        &[("DATABASE_URL", db.url().as_str())],
    );
    assert!(!ok);
    assert!(stderr.contains("the address is in use"), "{stderr}");
    server.interrupt();
}

#[tokio::test]
async fn a_webhook_to_a_private_address_is_refused_naming_the_address_and_the_setting() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    let server = Server::start(
        cwd.path(),
        &["--operator-token", "op"],
        &[("DATABASE_URL", &db.url())],
    )
    .await;
    let response = http()
        .post(format!("{}/v1/actions", server.base))
        .bearer_auth("op")
        .json(&serde_json::json!({
            "kind": "webhook", "tenant_id": "acme", "project_id": "p1", "lane_key": "w",
            "idempotency_key": "w1", "payload": {"url": "http://10.0.0.1/hook", "body": {}}}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_client_error(), "{}", response.status());
    let body: serde_json::Value = response.json().await.unwrap();
    let reason = body["reason"].as_str().unwrap();
    assert!(
        reason.contains("10.0.0.1 is private") && reason.contains("[http] allow_cidrs"),
        "{reason}"
    );
    server.interrupt();
}

/// A `localhost` webhook passes the enqueue (a name, not a literal address) and is refused when
/// it is resolved: the warning names the address and the setting, and the attempt that ended
/// FAILED is logged at info with its error code.
#[tokio::test]
async fn a_refused_localhost_webhook_and_its_failed_attempt_are_logged() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    let server = Server::start(
        cwd.path(),
        &["--operator-token", "op"],
        &[("DATABASE_URL", &db.url())],
    )
    .await;
    let response = http()
        .post(format!("{}/v1/actions", server.base))
        .bearer_auth("op")
        .json(&serde_json::json!({
            "kind": "webhook", "tenant_id": "acme", "project_id": "p1", "lane_key": "w",
            "idempotency_key": "w-local", "payload": {"url": "http://localhost:9/hook", "body": {}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let id = response.json::<serde_json::Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    let log = server
        .log
        .wait_for(&["destination refused", "attempt ended"], 30_000)
        .await;
    let refused = log
        .lines()
        .find(|l| l.contains("destination refused"))
        .unwrap();
    assert!(
        refused.contains("WARN")
            && refused.contains("127.0.0.1")
            && refused.contains("allow_cidrs"),
        "{refused}"
    );
    let ended = log.lines().find(|l| l.contains("attempt ended")).unwrap();
    assert!(
        ended.contains("INFO")
            && ended.contains(&format!("action_id={id}"))
            && ended.contains("kind=\"webhook\"")
            && ended.contains("destination_forbidden"),
        "{ended}"
    );
    server.interrupt();
}

/// `wharf send --state`: an envelope whose answer was lost stays pending, and the next run sends
/// those same bytes first; the inbox had stored the first copy, so it answers ignore-duplicate,
/// and the run goes on with the next sequence.
// Two worker threads: `run_in` blocks one while the forwarder's tasks run on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_whose_answer_was_lost_resends_the_same_bytes_and_is_a_duplicate() {
    use crate::support::{Forwarder, Forwarding};
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    let env = [("DATABASE_URL", db.url())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let admin = |args: &[&str]| {
        let (ok, stdout, stderr) = run_in(cwd.path(), args, &env);
        assert!(ok, "{args:?}: {stderr}");
        stdout
    };
    admin(&["tenant", "create", "acme"]);
    let issued: serde_json::Value = serde_json::from_str(
        admin(&[
            "credential",
            "issue",
            "--tenant",
            "acme",
            "--account",
            "laptop",
            "--json",
        ])
        .trim(),
    )
    .unwrap();
    let token = issued["token"].as_str().unwrap().to_owned();
    let seed = admin(&[
        "key",
        "generate",
        "--tenant",
        "acme",
        "--project",
        "p1",
        "--key-id",
        "k1",
    ]);
    let server = Server::start(cwd.path(), &[], &env).await;
    let lossy_port = free_port();
    let upstream = server.base.trim_start_matches("http://").to_owned();
    let _lossy = Forwarder::start(lossy_port, upstream, Forwarding::LoseAnswers).await;
    let payload = r#"{"producer_id":"laptop","acknowledged_sequence":0,"acknowledged_event_id":null,"version":1}"#;
    let send = |url: &str| {
        run_in(
            cwd.path(),
            &[
                "send",
                "--url",
                url,
                "--tenant",
                "acme",
                "--project",
                "p1",
                "--token",
                &token,
                "--key-id",
                "k1",
                "--key",
                seed.trim(),
                "--event-type",
                "sync_cursor",
                "--state",
                "producer.json",
                "--attempts-max",
                "1",
                "--payload",
                payload,
            ],
            &env,
        )
    };
    // The request reaches the inbox; its answer does not reach the producer.
    let (ok, stdout, stderr) = send(&format!("http://127.0.0.1:{lossy_port}"));
    assert!(!ok, "{stdout}{stderr}");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cwd.path().join("producer.json")).unwrap())
            .unwrap();
    assert!(state["pending"].is_object(), "{state}");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.inbox_identities")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        stored,
        1,
        "the first copy arrived: {stdout}{stderr}\n{}",
        server.log.text()
    );

    let (ok, stdout, stderr) = send(&server.base);
    assert!(ok, "{stdout}{stderr}");
    let said = format!("{stdout}{stderr}");
    assert!(
        said.contains("re-sending the envelope of sequence 1"),
        "{said}"
    );
    assert!(said.contains("ignore-duplicate"), "{said}");
    assert!(said.contains("sequence 2"), "{said}");
    let identities: Vec<String> =
        sqlx::query_scalar("SELECT producer_sequence::text FROM wharf.inbox_identities ORDER BY 1")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(identities, ["1", "2"], "one identity per sequence");
    server.interrupt();
}

/// `wharf retention run` says what it deleted, each count under its own name, and `wharf
/// drain` says how many actions it ran.
#[tokio::test]
async fn retention_and_drain_say_what_they_did() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    // An email to the embedded default (an .eml file under the data dir).
    sqlx::query(
        "INSERT INTO wharf.action_live (kind, tenant_id, project_id, lane_key, idempotency_key,
                                   content_digest, at_most_once, instance_level, state,
                                   max_attempts, payload, run_at)
         VALUES ('email', NULL, NULL, 'r1', 'r1', sha256('r1'::bytea), true, true, 'ADMITTED', 2,
                 '{\"notice\":\"message\",\"event\":{\"to\":\"ada@example.org\",
                   \"subject\":\"Hi\",\"text\":\"Hello\"}}'::jsonb, now())",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let env = [("DATABASE_URL", db.url())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (ok, stdout, stderr) = run_in(cwd.path(), &["drain"], &env);
    assert!(ok, "{stderr}");
    let said = format!("{stdout}{stderr}");
    assert!(said.contains("ran 1 attempt(s)"), "{said}");
    let state: String = sqlx::query_scalar("SELECT state FROM wharf.action")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(state, "DONE");

    let (ok, stdout, stderr) = run_in(
        cwd.path(),
        &["retention", "run", "--action-days", "0"],
        &env,
    );
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("deleted 0 inbox payload(s) older than 90 days")
            && stdout.contains("deleted 1 ended action(s) older than 0 days"),
        "{stdout}"
    );
    let (ok, stdout, stderr) = run_in(
        cwd.path(),
        &["retention", "run", "--action-days", "0", "--json"],
        &env,
    );
    assert!(ok, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        (&report["deleted_payloads"], &report["deleted_actions"]),
        (&serde_json::json!(0), &serde_json::json!(0))
    );
}
