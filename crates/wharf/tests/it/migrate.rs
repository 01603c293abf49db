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
