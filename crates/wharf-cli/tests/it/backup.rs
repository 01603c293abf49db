//! `wharf backup`, `wharf restore`, `wharf verify` against real databases.

use crate::support::wharf;

fn ok(args: &[&str], url: &str) -> String {
    let out = wharf()
        .args(args)
        .env("DATABASE_URL", url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "wharf {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test]
async fn backup_then_restore_round_trips_and_verifies() {
    let source = wharf_testkit::TestDb::new().await;
    sqlx::query("INSERT INTO wharf.inbox_tenants (tenant_id) VALUES ('acme')")
        .execute(&source.pool)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wharf.dump");
    let file = file.to_str().unwrap();
    ok(&["backup", "--out", file], &source.url());

    let target = wharf_testkit::TestDb::new().await;
    // A database that already has wharf's schema is not overwritten by accident.
    let out = wharf()
        .args(["restore", file])
        .env("DATABASE_URL", target.url())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--replace"));

    let printed = ok(&["restore", "--replace", file], &target.url());
    assert!(printed.contains("restored from"), "{printed}");
    let tenants: Vec<String> =
        sqlx::query_scalar("SELECT tenant_id::text FROM wharf.inbox_tenants")
            .fetch_all(&target.pool)
            .await
            .unwrap();
    assert_eq!(tenants, ["acme"]);
    let report = ok(&["verify", "--json"], &target.url());
    let report: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    assert_eq!(report["ok"], true, "{report}");
}

#[tokio::test]
async fn verify_fails_loudly_on_a_broken_invariant() {
    let db = wharf_testkit::TestDb::new().await;
    let mut conn = db.pool.acquire().await.unwrap();
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("ALTER TABLE wharf.action DROP CONSTRAINT ck_action_ended")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO wharf.action (kind, tenant_id, lane_key, idempotency_key, content_digest,
                                   at_most_once, instance_level, state, stop_reason, max_attempts,
                                   payload, run_at, ended_at)
         VALUES ('noop', 't', 'lane', 'k1', decode(repeat('00', 32), 'hex'), false, false,
                 'DONE', 'DONE', 3, '{\"secret\": 1}', now(), now())",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    drop(conn);
    let out = wharf()
        .args(["verify"])
        .env("DATABASE_URL", db.url())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("FAIL ended_action_with_payload"),
        "{stdout}"
    );
}
