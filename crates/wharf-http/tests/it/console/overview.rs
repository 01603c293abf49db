//! The overview's attempts per minute: which attempts the rows can place in time, and which
//! they cannot.

use chrono::{DateTime, Duration, DurationRound, Utc};
use wharf_testkit::TestDb;

use super::*;

async fn set(db: &TestDb, id: i64, sql: &str) {
    // Test-only text from the literals below.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE wharf.action_live SET {sql} WHERE id = $1"
    )))
    .bind(id)
    .execute(&db.pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn attempts_per_minute_count_each_latest_attempt_at_the_minute_its_call_started() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let now: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    // Ended UNCERTAIN just now, its call started now: counted in this minute.
    let ended = enqueue(&base, "a1", "lane-a1", false, None).await;
    end_uncertain(&db, ended).await;
    // Executing, its call started ten minutes ago: counted ten minutes back.
    let running = enqueue(&base, "a2", "lane-a2", false, None).await;
    set(
        &db,
        running,
        "state = 'EXECUTING', epoch = 1, attempt = 1, lease_expires_at = now() + interval '1 minute',
         write_started_at = now() - interval '10 minutes'",
    )
    .await;
    // Executing but not yet at its call: no time to place it at.
    let unfenced = enqueue(&base, "a3", "lane-a3", false, None).await;
    set(
        &db,
        unfenced,
        "state = 'EXECUTING', epoch = 1, attempt = 1, lease_expires_at = now() + interval '1 minute'",
    )
    .await;
    // Ended within the hour, but its call started two hours ago: outside the window.
    let old = enqueue(&base, "a4", "lane-a4", false, None).await;
    set(
        &db,
        old,
        "state = 'EXECUTING', epoch = 1, attempt = 1, lease_expires_at = now() + interval '1 minute',
         write_started_at = now() - interval '2 hours'",
    )
    .await;
    crate::support::end_by_hand(&db.pool, old, "UNCERTAIN", "LEASE_LOST_AFTER_WRITE", None).await;
    // Cancelled before it ever ran: an end, not an attempt.
    let cancelled = enqueue(&base, "a5", "lane-a5", false, None).await;
    crate::support::end_by_hand(&db.pool, cancelled, "CANCELLED", "OPERATOR", None).await;

    let mut conn = db.pool.acquire().await.unwrap();
    let o = wharf::console::overview(&mut conn, Some(now))
        .await
        .unwrap();
    let minute = |back: i64| {
        (now - Duration::minutes(back))
            .duration_trunc(Duration::minutes(1))
            .unwrap()
    };
    let got: Vec<(DateTime<Utc>, i64)> = o.attempts.iter().map(|a| (a.minute, a.n)).collect();
    assert_eq!(got, vec![(minute(10), 1), (minute(0), 1)]);
    assert!(!o.attempts_capped);
    // The ends count all three ended actions: attempts and ends are different series.
    assert_eq!(o.ended.iter().map(|e| e.n).sum::<i64>(), 3);

    let ops = Operator::sign_in(&base, "ada", READ_ONLY_TOKEN).await;
    let page = ops.get("").await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("Attempts per minute, last hour"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("id=\"attempts\">2 attempts"),
        "{}",
        page.body
    );
    assert!(page.body.contains("attempts per minute"), "{}", page.body);
}
