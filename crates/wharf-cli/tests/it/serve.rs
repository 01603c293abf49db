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
    assert!(crate::support::postgres_process_under(&data));
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
async fn serve_uses_database_url_and_makes_no_cluster() {
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
    // The data directory still holds wharf's keys, but no cluster.
    assert!(
        !cwd.path().join(".wharf/pg").exists(),
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

/// The README's quick start: an email enqueued over HTTP lands as one `.eml` file under the
/// data directory when no relay is configured.
#[tokio::test]
async fn an_enqueued_email_lands_as_a_file_under_the_embedded_default() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    let server = Server::start(
        cwd.path(),
        &["--operator-token", "op"],
        &[("DATABASE_URL", &db.url())],
    )
    .await;
    let body = serde_json::json!({
        "kind": "email", "lane_key": "email:ada", "idempotency_key": "welcome:ada",
        "payload": {"notice": "message", "event": {
            "to": "ada@example.org", "subject": "Welcome", "text": "Hello, Ada."}}
    });
    let response = crate::support::http()
        .post(format!("{}/v1/actions", server.base))
        .bearer_auth("op")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    let mail = cwd.path().join(".wharf/mail");
    let started = std::time::Instant::now();
    let file = loop {
        let files: Vec<_> = std::fs::read_dir(&mail)
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        let eml: Vec<_> = files
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "eml"))
            .collect();
        if let [one] = eml.as_slice() {
            break one.clone();
        }
        assert!(eml.len() <= 1, "more than one file for one action: {eml:?}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "no .eml file appeared in {}",
            mail.display()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("Subject: Welcome"), "{text}");
    assert!(text.contains("ada@example.org"), "{text}");
    assert!(text.contains("Message-ID: <"), "{text}");
    server.interrupt();
    let state: String = sqlx::query_scalar("SELECT state FROM wharf.action")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(state, "DONE");
}

#[tokio::test]
async fn serve_refuses_an_invalid_configuration_before_serving() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    for (table, reason) in [
        ("[executor]\nconcurrency_max = 0\n", "[executor]"),
        ("[executor]\nfence_margin_ms = 1000\n", "[executor]"),
        (
            "[executor]\nclaims_in_flight_max = 5\n",
            "claims_in_flight_max must be 1..=4",
        ),
        ("[email]\nrelay_port = 25\ncolour = \"red\"\n", "[email]"),
        ("[serve]\nlisten = \"not an address\"\n", "[serve]"),
        ("[console]\npath = \"console\"\n", "[console]"),
        ("[console]\nsession_ms = 0\n", "[console]"),
        ("[console]\ncolour = \"red\"\n", "console"),
        (
            "[inbox]\npayload_retention_days = 0\n",
            "payload_retention_days",
        ),
        (
            "[inbox]\nhousekeeping_interval_ms = 999\n",
            "housekeeping_interval_ms",
        ),
    ] {
        let config = cwd.path().join("wharf.toml");
        std::fs::write(&config, table).unwrap();
        let out = wharf()
            .current_dir(cwd.path())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("DATABASE_URL", db.url())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{table} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(reason), "{table}: {stderr}");
    }
}

#[tokio::test]
async fn serve_serves_the_console_unless_it_is_switched_off() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    let env = [
        ("DATABASE_URL", db.url()),
        ("WHARF_OPERATOR_TOKEN", "op-token".to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let on = Server::start(cwd.path(), &[], &env).await;
    let page = crate::support::http()
        .get(format!("{}/console/sign-in", on.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Sign in"));
    on.interrupt();

    std::fs::write(
        cwd.path().join("wharf.toml"),
        "[console]\npath = \"/ops\"\n",
    )
    .unwrap();
    let moved = Server::start(cwd.path(), &[], &env).await;
    let status = |base: String, path: &'static str| async move {
        crate::support::http()
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(status(moved.base.clone(), "/ops/sign-in").await, 200);
    assert_eq!(status(moved.base.clone(), "/console/sign-in").await, 404);
    moved.interrupt();

    let off = Server::start(cwd.path(), &["--no-console"], &env).await;
    assert_eq!(status(off.base.clone(), "/ops/sign-in").await, 404);
    off.interrupt();
}

/// `serve`'s inbox housekeeping removes a revoked key that signed nothing, on its own, and
/// audits it; a revoked key with replayable envelopes stays.
#[tokio::test]
async fn serve_removes_revoked_keys_nothing_depends_on() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = wharf()
            .current_dir(cwd.path())
            .args(args)
            .env("DATABASE_URL", db.url())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&["tenant", "create", "acme"]);
    for key in ["old", "kept"] {
        run(&[
            "key",
            "generate",
            "--tenant",
            "acme",
            "--project",
            "p1",
            "--key-id",
            key,
        ]);
    }
    run(&[
        "key",
        "revoke",
        "--tenant",
        "acme",
        "--project",
        "p1",
        "old",
    ]);
    // By hand, the active key is refused with the step that comes first.
    let refused = wharf()
        .current_dir(cwd.path())
        .args([
            "key",
            "remove",
            "--tenant",
            "acme",
            "--project",
            "p1",
            "kept",
            "--operator",
            "ops",
            "--reason",
            "tidy",
        ])
        .env("DATABASE_URL", db.url())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("is active") && stderr.contains("retire"),
        "{stderr}"
    );
    std::fs::write(
        cwd.path().join("wharf.toml"),
        "[inbox]\nhousekeeping_interval_ms = 1000\n",
    )
    .unwrap();
    let server = Server::start(cwd.path(), &[], &[("DATABASE_URL", &db.url())]).await;
    let started = std::time::Instant::now();
    loop {
        let keys: Vec<String> =
            sqlx::query_scalar("SELECT key_id FROM wharf.inbox_keys ORDER BY key_id")
                .fetch_all(&db.pool)
                .await
                .unwrap();
        if keys == ["kept"] {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "still {keys:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    server.interrupt();
    let audit: (String, String) = sqlx::query_as(
        "SELECT actor_account, key_id FROM wharf.inbox_audit WHERE action = 'key-remove'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        audit,
        (
            wharf::inbox::HOUSEKEEPING_OPERATOR.to_owned(),
            "old".to_owned()
        )
    );
}
