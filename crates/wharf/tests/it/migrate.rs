//! The schema home and per-test isolation.

use wharf_testkit::TestDb;

#[tokio::test]
async fn migrations_live_in_their_own_schema() {
    let db = TestDb::new().await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_schema || '.' || table_name FROM information_schema.tables
          WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert!(
        tables.contains(&"wharf._sqlx_migrations".to_owned()),
        "{tables:?}"
    );
    assert!(tables.iter().all(|t| t.starts_with("wharf.")), "{tables:?}");
    // Running the migrations again is a no-op, as `wharf serve` does at every start.
    wharf::migrate::run(&db.pool).await.unwrap();
}

#[tokio::test]
async fn each_test_gets_its_own_database() {
    let a = TestDb::new().await;
    let b = TestDb::new().await;
    assert_ne!(a.name(), b.name());
    sqlx::query("CREATE TABLE public.only_in_a (x int)")
        .execute(&a.pool)
        .await
        .unwrap();
    let in_b: bool = sqlx::query_scalar("SELECT to_regclass('public.only_in_a') IS NOT NULL")
        .fetch_one(&b.pool)
        .await
        .unwrap();
    assert!(
        !in_b,
        "a table made in one test's database is visible in another's"
    );
    let second = a.another_pool(2).await;
    let in_a: bool = sqlx::query_scalar("SELECT to_regclass('public.only_in_a') IS NOT NULL")
        .fetch_one(&second)
        .await
        .unwrap();
    assert!(
        in_a,
        "another pool on the same test database sees the same data"
    );
}

#[tokio::test]
async fn verify_passes_on_a_fresh_database_and_names_a_broken_invariant() {
    let db = TestDb::new().await;
    let report = wharf::verify::run(&db.pool).await.unwrap();
    assert!(report.ok(), "{report:?}");
    assert!(wharf::verify::schema_exists(&db.pool).await.unwrap());

    // Break one invariant behind wharf's back (the guard trigger would refuse an UPDATE, so
    // disable triggers for this session as a restore tool could).
    let mut conn = db.pool.acquire().await.unwrap();
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO wharf.action (kind, tenant_id, lane_key, idempotency_key, content_digest,
                                   at_most_once, instance_level, state, epoch, attempt,
                                   max_attempts, payload, run_at, lease_expires_at)
         VALUES ('noop', 't', 'lane', 'k1', decode(repeat('00', 32), 'hex'), false, false,
                 'EXECUTING', 1, 1, 3, '{}', now(), now()),
                ('noop', 't', 'lane2', 'k2', decode(repeat('00', 32), 'hex'), false, false,
                 'EXECUTING', 0, 0, 3, '{}', now(), now())",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    drop(conn);
    let report = wharf::verify::run(&db.pool).await.unwrap();
    assert!(!report.ok());
    let broken: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| c.violations > 0)
        .map(|c| c.name)
        .collect();
    assert_eq!(broken, ["executing_without_lease"]);
}

/// 0051 makes the console's trail and the library's one: a database that has rows in both at
/// 0050 keeps every row, in the order each was written, with who, role, what, when and
/// correlation id, and the table still refuses changes.
#[tokio::test]
async fn the_console_audit_moves_into_the_one_operator_audit_with_every_row_kept() {
    let db = TestDb::new().await;
    // Back to an empty schema, then up to 0050 only: the state 0051 upgrades.
    sqlx::query("DROP SCHEMA wharf CASCADE")
        .execute(&db.pool)
        .await
        .unwrap();
    let full = wharf::migrate::migrator();
    let mut before = wharf::migrate::migrator();
    before.migrations = full
        .migrations
        .iter()
        .filter(|m| m.version < 51)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    assert!(full.migrations.iter().any(|m| m.version == 51));
    before.run(&db.pool).await.unwrap();
    sqlx::query(
        "INSERT INTO wharf.operator_audit (operation, action_id, actor, detail, correlation_id,
                                           recorded_at)
         VALUES ('cancel', 7, 'cli-bob', '{\"from\": \"ADMITTED\"}', 'corr-1',
                 '2026-01-01T10:00:00Z')",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO wharf.console_audit (operator, role, action, target, detail, correlation_id,
                                          recorded_at)
         VALUES ('ada', 'read-only', 'sign-in', 'console', 'session until x', 'corr-2',
                 '2026-01-01T09:00:00Z'),
                ('ada', 'operator', 'action-admit', 'action 42', 'admitted', 'corr-3',
                 '2026-01-01T09:30:00Z')",
    )
    .execute(&db.pool)
    .await
    .unwrap();

    wharf::migrate::run(&db.pool).await.unwrap();

    type Row = (
        i64,
        String,
        Option<i64>,
        String,
        Option<String>,
        Option<String>,
        serde_json::Value,
        String,
        String,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT audit_id, operation, action_id, actor, role, target, detail, correlation_id,
                to_char(recorded_at AT TIME ZONE 'UTC', 'HH24:MI')
           FROM wharf.operator_audit ORDER BY audit_id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let cancel_id = rows[0].0;
    assert_eq!(
        rows,
        vec![
            (
                cancel_id,
                "cancel".into(),
                Some(7),
                "cli-bob".into(),
                None,
                None,
                serde_json::json!({"from": "ADMITTED"}),
                "corr-1".into(),
                "10:00".into()
            ),
            (
                cancel_id + 1,
                "sign-in".into(),
                None,
                "ada".into(),
                Some("read-only".into()),
                Some("console".into()),
                serde_json::json!({"result": "session until x"}),
                "corr-2".into(),
                "09:00".into()
            ),
            (
                cancel_id + 2,
                "action-admit".into(),
                Some(42),
                "ada".into(),
                Some("operator".into()),
                Some("action 42".into()),
                serde_json::json!({"result": "admitted"}),
                "corr-3".into(),
                "09:30".into()
            ),
        ]
    );
    let gone: Option<String> =
        sqlx::query_scalar("SELECT to_regclass('wharf.console_audit')::text")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(gone, None, "one trail, not two");
    for change in [
        "UPDATE wharf.operator_audit SET actor = 'x'",
        "DELETE FROM wharf.operator_audit",
        "TRUNCATE wharf.operator_audit",
    ] {
        assert!(
            sqlx::query(change).execute(&db.pool).await.is_err(),
            "{change}"
        );
    }
    // The library's rows keep their closed list; only a console row (with a role) names its own.
    let bad = sqlx::query(
        "INSERT INTO wharf.operator_audit (operation, action_id, actor, detail, correlation_id)
         VALUES ('sign-in', NULL, 'x', '{}', 'c')",
    )
    .execute(&db.pool)
    .await;
    assert!(bad.is_err());
}
