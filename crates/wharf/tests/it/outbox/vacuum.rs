//! The executor's vacuum of the live table (`ExecutorConfig::vacuum_live`): after enough dead
//! row versions and not before, from `run`'s own task, never when switched off, and never for a
//! role that may not vacuum the table.
//!
//! The dead-row counts are the server's statistics, which reach it a second or so after the
//! statements that made them: the tests wait for them (bounded), and switch autovacuum off for
//! the live table, so that only the executor's vacuum can reset them.

use std::time::Duration;

use sqlx::PgPool;
use wharf::outbox::{Executor, ExecutorConfig, LiveVacuum};
use wharf_testkit::TestDb;

use super::support::*;

/// The test settings with the lowest threshold allowed and none per live row.
fn vacuum_config() -> ExecutorConfig {
    let mut c = config();
    c.vacuum_dead_rows_min = wharf::outbox::VACUUM_DEAD_ROWS_LIMIT_MIN;
    c.vacuum_dead_per_mille = 0;
    c.vacuum_check_interval_ms = 20;
    c
}

async fn no_autovacuum(pool: &PgPool) {
    sqlx::query("ALTER TABLE wharf.action_live SET (autovacuum_enabled = false)")
        .execute(pool)
        .await
        .unwrap();
}

/// Manual vacuums of the live table so far.
async fn vacuums(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'wharf.action_live'::regclass",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Enqueues `n` actions, one lane each; every one drained leaves two dead row versions (its
/// claim's and its ending's).
async fn enqueue_many(pool: &PgPool, registry: &std::sync::Arc<wharf::outbox::Registry>, n: u32) {
    for i in 0..n {
        enqueue(
            pool,
            registry,
            req(&format!("lane-{i}"), &format!("key-{i}")),
        )
        .await;
    }
}

/// Asks [`Executor::vacuum_if_due`] until it vacuums (the statistics arrive a second or so
/// late); (dead rows before, dead rows left after).
async fn until_vacuumed(ex: &Executor) -> (u64, u64) {
    for _ in 0..300 {
        match ex.vacuum_if_due().await.unwrap() {
            LiveVacuum::Vacuumed {
                dead_rows,
                left_rows,
                ..
            } => return (dead_rows, left_rows),
            LiveVacuum::NotDue { .. } => tokio::time::sleep(Duration::from_millis(100)).await,
            other => panic!("the test's role owns the table: {other:?}"),
        }
    }
    panic!("no vacuum within 30 s");
}

/// A test database without autovacuum on the live table, and an executor whose vacuum only
/// [`Executor::vacuum_if_due`] called by hand runs (`vacuum_live` off).
async fn by_hand() -> (TestDb, std::sync::Arc<wharf::outbox::Registry>, Executor) {
    let db = TestDb::new().await;
    no_autovacuum(&db.pool).await;
    let (registry, ..) = registry();
    let mut c = vacuum_config();
    c.vacuum_live = false;
    let ex = Executor::new(db.pool.clone(), registry.clone(), c).unwrap();
    (db, registry, ex)
}

#[tokio::test]
async fn the_live_table_is_vacuumed_after_its_threshold_of_dead_rows_and_not_before() {
    let (db, registry, ex) = by_hand().await;
    // Nothing dead yet: not due, against the threshold of the settings.
    match ex.vacuum_if_due().await.unwrap() {
        LiveVacuum::NotDue {
            dead_rows,
            threshold_rows,
        } => {
            assert_eq!(threshold_rows, 100);
            assert!(dead_rows < 100, "{dead_rows}");
        }
        other => panic!("expected NotDue, got {other:?}"),
    }
    // 49 actions drained: 98 dead versions, one short of the threshold.
    enqueue_many(&db.pool, &registry, 49).await;
    assert!(ex.drain().await.unwrap().finished);
    let mut counted = 0;
    for _ in 0..300 {
        match ex.vacuum_if_due().await.unwrap() {
            LiveVacuum::NotDue { dead_rows, .. } if dead_rows >= 98 => {
                counted = dead_rows;
                break;
            }
            LiveVacuum::NotDue { .. } => tokio::time::sleep(Duration::from_millis(100)).await,
            other => panic!("98 dead versions must not start a vacuum, got {other:?}"),
        }
    }
    assert_eq!(
        counted, 98,
        "the statistics never showed the drain's dead versions"
    );
    assert_eq!(vacuums(&db.pool).await, 0);
    // One more: 100, the threshold itself.
    enqueue(&db.pool, &registry, req("lane-last", "key-last")).await;
    assert!(ex.drain().await.unwrap().finished);
    let (dead, left) = until_vacuumed(&ex).await;
    assert_eq!((dead, left), (100, 0));
    assert_eq!(vacuums(&db.pool).await, 1);
    // The vacuum reset the count: nothing is due again.
    assert!(matches!(
        ex.vacuum_if_due().await.unwrap(),
        LiveVacuum::NotDue { dead_rows: 0, .. }
    ));
}

#[tokio::test]
async fn dead_rows_an_open_snapshot_keeps_do_not_start_a_vacuum_at_every_check() {
    let (db, registry, ex) = by_hand().await;
    enqueue_many(&db.pool, &registry, 50).await;
    // A long transaction elsewhere on the server: its snapshot, taken before the drain, still
    // sees every version the drain leaves dead, so no vacuum can remove them.
    let mut long = db
        .pool
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    sqlx::query("SELECT count(*) FROM wharf.action_live")
        .execute(&mut *long)
        .await
        .unwrap();
    assert!(ex.drain().await.unwrap().finished);
    let (dead, left) = until_vacuumed(&ex).await;
    assert_eq!((dead, left), (100, 100), "the vacuum could remove nothing");
    // The next check does not vacuum the same 100 again: its threshold is beyond them.
    match ex.vacuum_if_due().await.unwrap() {
        LiveVacuum::NotDue {
            dead_rows,
            threshold_rows,
        } => assert_eq!((dead_rows, threshold_rows), (100, 200)),
        other => panic!("expected NotDue past what was left, got {other:?}"),
    }
    assert_eq!(vacuums(&db.pool).await, 1);
    long.rollback().await.unwrap();
}

/// Starts `run`; the returned function stops it and waits for it to end.
fn start(ex: Executor) -> impl AsyncFnOnce() {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        ex.run(async {
            let _ = stopped.await;
        })
        .await
    });
    async move || {
        stop.send(()).unwrap();
        running.await.unwrap().unwrap();
    }
}

/// Runs the executor until `n` actions are done, then `extra` longer, and stops it.
async fn run_until_done(ex: Executor, pool: &PgPool, n: i64, extra: Duration) {
    let stop = start(ex);
    let mut done = 0;
    for _ in 0..3_000 {
        done = sqlx::query_scalar("SELECT count(*) FROM wharf.action_ended WHERE state = 'DONE'")
            .fetch_one(pool)
            .await
            .unwrap();
        if done == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(done, n);
    tokio::time::sleep(extra).await;
    stop().await;
}

#[tokio::test]
async fn the_running_executor_vacuums_the_live_table_and_not_when_switched_off() {
    for on in [true, false] {
        let db = TestDb::new().await;
        no_autovacuum(&db.pool).await;
        let (registry, ..) = registry();
        let mut c = vacuum_config();
        c.vacuum_live = on;
        let ex = Executor::new(db.pool.clone(), registry.clone(), c).unwrap();
        enqueue_many(&db.pool, &registry, 60).await;
        if on {
            let stop = start(ex);
            let mut seen = 0;
            for _ in 0..300 {
                seen = vacuums(&db.pool).await;
                if seen > 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            stop().await;
            assert!(seen > 0, "no vacuum after 120 dead versions");
        } else {
            // Long enough for the statistics to arrive and the check to have run many times.
            run_until_done(ex, &db.pool, 60, Duration::from_millis(2_500)).await;
            assert_eq!(vacuums(&db.pool).await, 0);
        }
    }
}

#[tokio::test]
async fn a_role_that_may_not_vacuum_the_table_is_told_so_and_nothing_is_vacuumed() {
    let db = TestDb::new().await;
    let role = format!("wharf_test_no_vacuum_{}", std::process::id());
    // Roles are the server's, not the test database's: one name per test process.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DO $$ BEGIN CREATE ROLE {role} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )))
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "GRANT USAGE ON SCHEMA wharf TO {role}"
    )))
    .execute(&db.pool)
    .await
    .unwrap();
    // The same server and credentials, acting as the role (the test's user is a member).
    let options = (*db.pool.connect_options())
        .clone()
        .options([("role", role.as_str())]);
    let as_role = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options)
        .await
        .unwrap();
    let (registry, ..) = registry();
    let ex = Executor::new(as_role.clone(), registry, vacuum_config()).unwrap();
    let answer = ex.vacuum_if_due().await.unwrap();
    as_role.close().await;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP OWNED BY {role}")))
        .execute(&db.pool)
        .await
        .unwrap();
    // Gone when no other database holds a grant of it; another test process may still use it.
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP ROLE IF EXISTS {role}")))
        .execute(&db.pool)
        .await;
    assert_eq!(answer, LiveVacuum::NotAllowed);
    assert_eq!(vacuums(&db.pool).await, 0);
}
