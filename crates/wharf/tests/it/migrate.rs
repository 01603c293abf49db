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
        "INSERT INTO wharf.action_live (kind, tenant_id, lane_key, idempotency_key, content_digest,
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
    // With their key rows, as an enqueue writes them: only the epoch is broken.
    sqlx::query(
        "INSERT INTO wharf.action_key (idempotency_key, action_id, content_digest)
         SELECT idempotency_key, id, content_digest FROM wharf.action_live",
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

/// Back to an empty schema, then every migration below `version` (which must exist): the state
/// that migration upgrades.
async fn migrated_up_to_before(db: &TestDb, version: i64) {
    sqlx::query("DROP SCHEMA wharf CASCADE")
        .execute(&db.pool)
        .await
        .unwrap();
    let full = wharf::migrate::migrator();
    let mut before = wharf::migrate::migrator();
    before.migrations = full
        .migrations
        .iter()
        .filter(|m| m.version < version)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    assert!(full.migrations.iter().any(|m| m.version == version));
    before.run(&db.pool).await.unwrap();
}

/// 0051 makes the console's trail and the library's one: a database that has rows in both at
/// 0050 keeps every row, in the order each was written, with who, role, what, when and
/// correlation id, and the table still refuses changes.
#[tokio::test]
async fn the_console_audit_moves_into_the_one_operator_audit_with_every_row_kept() {
    let db = TestDb::new().await;
    // Back to an empty schema, then up to 0050 only: the state 0051 upgrades.
    migrated_up_to_before(&db, 51).await;
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

/// 0060 moves ended actions out of the live table: a database with live and ended actions at
/// 0051 keeps every action as `wharf.action` showed it (now a view), each in its own table,
/// every key in wharf.action_key with its action's id and digest, and new ids after the old.
#[tokio::test]
async fn ended_actions_move_to_their_own_table_with_every_action_and_key_kept() {
    let db = TestDb::new().await;
    migrated_up_to_before(&db, 60).await;
    sqlx::query(
        "INSERT INTO wharf.action (kind, tenant_id, lane_key, idempotency_key, content_digest,
                                   at_most_once, instance_level, state, stop_reason, epoch,
                                   attempt, max_attempts, payload, subject_account_id, run_at,
                                   lease_expires_at, write_started_at, error_code, ended_at)
         VALUES ('noop', 't', 'l1', 'live', sha256('1'), false, false, 'ADMITTED', NULL, 0, 0,
                 3, '{\"n\": 1}', 'acct', now(), NULL, NULL, NULL, NULL),
                ('noop', 't', 'l2', 'running', sha256('2'), true, false, 'EXECUTING', NULL, 1,
                 1, 3, '{\"n\": 2}', NULL, now(), now() + interval '1 minute', now(), NULL,
                 NULL),
                ('noop', 't', 'l3', 'done', sha256('3'), false, false, 'DONE', 'DONE', 1, 1, 3,
                 NULL, 'acct', now(), NULL, now(), NULL, now()),
                ('noop', 't', 'l4', 'failed', sha256('4'), false, false, 'FAILED',
                 'ATTEMPTS_EXHAUSTED', 3, 3, 3, NULL, NULL, now(), NULL, NULL, 'http_503',
                 now())",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    const EVERY_ACTION: &str = "SELECT string_agg(concat_ws('|', id, kind, tenant_id, lane_key,
                                       idempotency_key, encode(content_digest, 'hex'),
                                       at_most_once, state, stop_reason, epoch, attempt,
                                       max_attempts, payload, subject_account_id, run_at,
                                       lease_expires_at, write_started_at, error_code,
                                       created_at, ended_at), E'\\n' ORDER BY id)
                                  FROM wharf.action";
    let was: String = sqlx::query_scalar(EVERY_ACTION)
        .fetch_one(&db.pool)
        .await
        .unwrap();

    wharf::migrate::run(&db.pool).await.unwrap();

    let is: String = sqlx::query_scalar(EVERY_ACTION)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(is, was);
    let text = |sql: &'static str| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(sql)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        text("SELECT string_agg(idempotency_key, ',' ORDER BY id) FROM wharf.action_live").await,
        "live,running"
    );
    assert_eq!(
        text("SELECT string_agg(idempotency_key, ',' ORDER BY id) FROM wharf.action_ended").await,
        "done,failed"
    );
    assert_eq!(
        text(
            "SELECT string_agg(k.idempotency_key, ',' ORDER BY k.action_id)
               FROM wharf.action_key k
               JOIN wharf.action a ON a.id = k.action_id
                AND a.idempotency_key = k.idempotency_key
                AND a.content_digest = k.content_digest"
        )
        .await,
        "live,running,done,failed"
    );
    // A new key draws an id after every old action's.
    let (new_id, max_old): (i64, i64) = sqlx::query_as(
        "WITH k AS (INSERT INTO wharf.action_key (idempotency_key, content_digest)
                    VALUES ('new', sha256('5')) RETURNING action_id)
         SELECT (SELECT action_id FROM k), (SELECT max(id) FROM wharf.action)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(new_id > max_old, "{new_id} <= {max_old}");
    sqlx::query("DELETE FROM wharf.action_key WHERE idempotency_key = 'new'")
        .execute(&db.pool)
        .await
        .unwrap();
    let report = wharf::verify::run(&db.pool).await.unwrap();
    assert!(report.ok(), "{report:?}");
}
