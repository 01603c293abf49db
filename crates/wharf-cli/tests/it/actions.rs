//! `wharf actions`, `wharf drain`, `wharf dead-letters` against a real database.

use serde_json::Value;

use crate::support::wharf;

fn run(args: &[&str], url: &str, data_dir: &std::path::Path) -> (bool, String, String) {
    let out = wharf()
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env("DATABASE_URL", url)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn enqueue(db: &wharf_testkit::TestDb, body: &str) {
    // The binary's own HTTP path is covered elsewhere; here a row is enough, written as an
    // application would, through SQL the test controls.
    sqlx::query(
        "INSERT INTO wharf.action_live (kind, tenant_id, project_id, lane_key, idempotency_key,
                                   content_digest, at_most_once, instance_level, state,
                                   max_attempts, payload, run_at)
         VALUES ($1, 'acme', 'p1', $2, $2, sha256($2::bytea), $1 = 'email', $1 = 'email',
                 'ADMITTED', 2, $3::jsonb, now())",
    )
    .bind(if body.contains("notice") {
        "email"
    } else {
        "webhook"
    })
    .bind(format!("key-{}", body.len()))
    .bind(body)
    .execute(&db.pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn drain_runs_everything_and_list_show_and_dead_letters_report_it() {
    let db = wharf_testkit::TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    enqueue(
        &db,
        r#"{"notice":"message","event":{"to":"ada@example.org","subject":"Hi","text":"Hello"}}"#,
    )
    .await;
    // localhost resolves to loopback, which is not on the default allow-list: refused for good.
    enqueue(&db, r#"{"url":"http://localhost:9/hook","body":{"n":1}}"#).await;

    let (ok, stdout, stderr) = run(&["drain"], &db.url(), dir.path());
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("ran 2 attempt(s)"), "{stdout}");

    let (ok, stdout, stderr) = run(&["actions", "list", "--json"], &db.url(), dir.path());
    assert!(ok, "{stderr}");
    let page: Value = serde_json::from_str(stdout.trim()).unwrap();
    let states: Vec<(&str, &str)> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["kind"].as_str().unwrap(), a["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("email", "DONE"), ("webhook", "FAILED")]);

    let (ok, stdout, _) = run(
        &["actions", "list", "--state", "FAILED"],
        &db.url(),
        dir.path(),
    );
    assert!(ok);
    assert!(
        stdout.contains("webhook") && !stdout.contains("email"),
        "{stdout}"
    );
    let (ok, _, stderr) = run(
        &["actions", "list", "--state", "RUNNING"],
        &db.url(),
        dir.path(),
    );
    assert!(!ok);
    assert!(stderr.contains("RUNNING"), "{stderr}");

    let id = page["items"][0]["id"].as_i64().unwrap().to_string();
    let (ok, stdout, _) = run(&["actions", "show", &id], &db.url(), dir.path());
    assert!(ok);
    assert!(stdout.contains("DONE (DONE)"), "{stdout}");
    let (ok, _, stderr) = run(&["actions", "show", "999999"], &db.url(), dir.path());
    assert!(!ok);
    assert!(stderr.contains("no action 999999"), "{stderr}");

    let (ok, stdout, stderr) = run(
        &[
            "dead-letters",
            "--tenant",
            "acme",
            "--project",
            "p1",
            "--json",
        ],
        &db.url(),
        dir.path(),
    );
    assert!(ok, "{stderr}");
    let page: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["items"][0]["error_code"], "destination_forbidden");
    let (ok, _, _) = run(
        &[
            "dead-letters",
            "--tenant",
            "acme",
            "--project",
            "p1",
            "--limit",
            "101",
        ],
        &db.url(),
        dir.path(),
    );
    assert!(!ok, "a page over 100 rows was accepted");
    assert!(dir.path().join("mail").read_dir().unwrap().count() == 1);
}
