//! `wharf actions cancel|resolve|resolutions` and `wharf audit` against a real database: the
//! state they leave, the audit they write, and that a refusal changes nothing.

use serde_json::Value;

use crate::support::wharf;

fn run(args: &[&str], url: &str, data_dir: &std::path::Path) -> (bool, String, String) {
    let out = wharf()
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env("DATABASE_URL", url)
        .env("WHARF_ACTOR", "ops-test")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// An admitted webhook action, written as an application would.
async fn admitted(db: &wharf_testkit::TestDb, key: &str) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO wharf.action_live (kind, tenant_id, project_id, lane_key, idempotency_key,
                                   content_digest, at_most_once, instance_level, state,
                                   max_attempts, payload, run_at)
         VALUES ('webhook', 'acme', 'p1', $1, $1, sha256($1::bytea), false, false, 'ADMITTED',
                 2, '{\"url\":\"http://localhost:9/hook\",\"body\":{\"n\":1}}', now())
         RETURNING id",
    )
    .bind(key)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

async fn snapshot(db: &wharf_testkit::TestDb) -> String {
    sqlx::query_scalar(
        "SELECT concat_ws(E'\\n',
            (SELECT string_agg(a::text, E'\\n' ORDER BY id) FROM wharf.action a),
            (SELECT string_agg(o::text, E'\\n' ORDER BY audit_id) FROM wharf.operator_audit o),
            (SELECT string_agg(r::text, E'\\n' ORDER BY resolution_id) FROM wharf.action_resolution r))",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn cancel_resolve_and_audit_from_the_command_line() {
    let db = wharf_testkit::TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let url = db.url();
    let live = admitted(&db, "live").await;
    let doubt = admitted(&db, "doubt").await;
    sqlx::query(
        "UPDATE wharf.action_live SET state = 'EXECUTING', epoch = epoch + 1,
                lease_expires_at = now() + interval '1 minute' WHERE id = $1",
    )
    .bind(doubt)
    .execute(&db.pool)
    .await
    .unwrap();
    // Ended in doubt: moved from wharf.action_live to wharf.action_ended, as the executor does.
    sqlx::query(
        "WITH gone AS (DELETE FROM wharf.action_live WHERE id = $1 RETURNING *)
         INSERT INTO wharf.action_ended (id, kind, tenant_id, project_id, lane_key, idempotency_key,
                                         content_digest, at_most_once, instance_level, state,
                                         stop_reason, epoch, attempt, max_attempts, subject_account_id,
                                         run_at, expires_at, write_started_at, readback_ref, error_code,
                                         created_at, ended_at)
         SELECT id, kind, tenant_id, project_id, lane_key, idempotency_key, content_digest,
                at_most_once, instance_level, $2, $3, epoch, attempt, max_attempts,
                subject_account_id, run_at, expires_at, write_started_at, readback_ref, $4, created_at,
                now()
           FROM gone",
    )
    .bind(doubt)
    .bind("UNCERTAIN")
    .bind("UNCERTAIN_PROVIDER")
    .bind(None::<String>)
    .execute(&db.pool)
    .await
    .unwrap();

    // Refusals first: each names the rule and changes nothing.
    let before = snapshot(&db).await;
    let live_s = live.to_string();
    let doubt_s = doubt.to_string();
    for (args, needle) in [
        (vec!["actions", "cancel", &doubt_s], "cannot be cancelled"),
        (vec!["actions", "cancel", "999999"], "no action 999999"),
        (
            vec!["actions", "cancel", &live_s, "--correlation-id", "bad id"],
            "correlation_id",
        ),
        (
            vec!["actions", "resolve", &live_s, "--finding", "delivered"],
            "not UNCERTAIN",
        ),
        (
            vec!["actions", "resolve", &doubt_s, "--finding", "perhaps"],
            "delivered or not-delivered",
        ),
        (
            vec![
                "actions",
                "resolve",
                &doubt_s,
                "--finding",
                "delivered",
                "--resend-payload",
                "{}",
            ],
            "only an action found not delivered",
        ),
        (
            vec![
                "actions",
                "resolve",
                &doubt_s,
                "--finding",
                "not-delivered",
                "--resend-payload",
                "{",
            ],
            "not JSON",
        ),
        (vec!["audit", "--limit", "101"], "101"),
    ] {
        let (ok, stdout, stderr) = run(&args, &url, dir.path());
        assert!(!ok, "{args:?} succeeded: {stdout}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    assert_eq!(snapshot(&db).await, before);

    let (ok, stdout, stderr) = run(
        &[
            "actions",
            "cancel",
            &live_s,
            "--correlation-id",
            "ticket-42",
            "--json",
        ],
        &url,
        dir.path(),
    );
    assert!(ok, "{stdout}{stderr}");
    let cancelled = json(&stdout);
    assert_eq!(
        (&cancelled["id"], &cancelled["from"], &cancelled["state"]),
        (
            &Value::from(live),
            &Value::from("ADMITTED"),
            &Value::from("CANCELLED")
        )
    );
    let state: String =
        sqlx::query_scalar("SELECT state || '/' || stop_reason FROM wharf.action WHERE id = $1")
            .bind(live)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(state, "CANCELLED/OPERATOR");

    let (ok, stdout, stderr) = run(
        &[
            "actions",
            "resolve",
            &doubt_s,
            "--finding",
            "not-delivered",
            "--note",
            "no delivery in the receiver's log",
            "--resend-payload",
            r#"{"url":"http://localhost:9/hook","body":{"n":2}}"#,
            "--json",
        ],
        &url,
        dir.path(),
    );
    assert!(ok, "{stdout}{stderr}");
    let resolved = json(&stdout);
    assert_eq!(resolved["resolution"]["finding"], "not-delivered");
    assert_eq!(resolved["resolution"]["actor"], "ops-test");
    assert_eq!(resolved["resent_created"], true);
    let resent = resolved["resent_action_id"].as_i64().unwrap();
    let (kind, lane, state): (String, String, String) =
        sqlx::query_as("SELECT kind, lane_key, state FROM wharf.action WHERE id = $1")
            .bind(resent)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(
        (kind.as_str(), lane.as_str(), state.as_str()),
        ("webhook", "doubt", "ADMITTED")
    );

    let (ok, stdout, _) = run(
        &["actions", "resolutions", &doubt_s, "--json"],
        &url,
        dir.path(),
    );
    assert!(ok);
    assert_eq!(
        json(&stdout)["items"][0]["note"],
        "no delivery in the receiver's log"
    );

    let (ok, stdout, stderr) = run(&["audit", "--json"], &url, dir.path());
    assert!(ok, "{stderr}");
    let audit = json(&stdout);
    let rows: Vec<(String, i64, String, String)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["operation"].as_str().unwrap().to_owned(),
                e["action_id"].as_i64().unwrap(),
                e["actor"].as_str().unwrap().to_owned(),
                e["correlation_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0],
        ("cancel".into(), live, "ops-test".into(), "ticket-42".into())
    );
    assert_eq!((rows[1].0.as_str(), rows[1].1), ("resolve", doubt));
    assert!(rows[1].3.starts_with("cli-"), "{}", rows[1].3);
    assert_eq!(audit["next_after"], Value::Null);

    let (ok, stdout, _) = run(&["audit", "--action", &live_s], &url, dir.path());
    assert!(ok);
    assert!(
        stdout.contains("cancel") && !stdout.contains("resolve"),
        "{stdout}"
    );
}

/// One trail: a console action (written by the console's own writer, `wharf::console::record`,
/// in its transaction as the console does) and a cancel from this command line both come back
/// from `wharf audit`, in the order they were written.
#[tokio::test]
async fn wharf_audit_reads_the_console_and_the_command_line_in_one_trail() {
    let db = wharf_testkit::TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let url = db.url();
    let proposal = admitted(&db, "console-side").await;
    let live = admitted(&db, "cli-side").await;

    let mut conn = db.pool.acquire().await.unwrap();
    let (_, session) =
        wharf::console::sign_in(&mut conn, "ada", wharf::console::Role::Operator, 60_000)
            .await
            .unwrap();
    wharf::console::record(
        &mut *conn,
        wharf::console::Entry {
            session: &session,
            action: "action-admit",
            target: &format!("action {proposal}"),
            detail: "admitted",
            correlation_id: "corr-console-1",
            action_id: Some(proposal),
        },
    )
    .await
    .unwrap();
    drop(conn);
    let (ok, _, err) = run(
        &["actions", "cancel", &live.to_string(), "--json"],
        &url,
        dir.path(),
    );
    assert!(ok, "{err}");

    let (ok, out, err) = run(&["audit", "--json"], &url, dir.path());
    assert!(ok, "{err}");
    let body = json(&out);
    let items = body["items"].as_array().unwrap();
    let got: Vec<(&str, &str, &Value, &Value)> = items
        .iter()
        .map(|i| {
            (
                i["operation"].as_str().unwrap(),
                i["actor"].as_str().unwrap(),
                &i["role"],
                &i["action_id"],
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "action-admit",
                "ada",
                &Value::from("operator"),
                &Value::from(proposal)
            ),
            ("cancel", "ops-test", &Value::Null, &Value::from(live)),
        ]
    );
    assert_eq!(items[0]["target"], format!("action {proposal}"));
    assert_eq!(items[0]["detail"]["result"], "admitted");
    assert_eq!(items[0]["correlation_id"], "corr-console-1");
    // The library's rows read as they always did: no role or target key at all.
    assert!(items[1].get("role").is_none() && items[1].get("target").is_none());

    // The text form says which row came from the console, and `--action` finds it too.
    let (ok, out, err) = run(&["audit"], &url, dir.path());
    assert!(ok, "{err}");
    assert!(out.contains("by ada (console, operator)"), "{out}");
    assert!(out.contains("by ops-test"), "{out}");
    let (ok, out, err) = run(
        &["audit", "--action", &proposal.to_string(), "--json"],
        &url,
        dir.path(),
    );
    assert!(ok, "{err}");
    assert_eq!(json(&out)["items"][0]["operation"], "action-admit");
}
