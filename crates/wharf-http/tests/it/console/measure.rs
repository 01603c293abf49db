//! Page-render times at a million actions: a measurement, not a test of speed (nothing here
//! asserts a time). Run it by name, on a quiet machine:
//!
//! ```sh
//! cargo test -p wharf-http --test it -- --ignored --nocapture console::measure
//! ```
//!
//! It fills one database with `WHARF_CONSOLE_ACTIONS` actions (default 1,000,000: 1 % admitted
//! across 10,000 lanes, 0.02 % proposed, 0.1 % UNCERTAIN, 0.1 % FAILED, the rest DONE, the
//! newest ended 0.3 s apart so the last hour holds 12,000 ends), then times every page from
//! request to last byte, seven times each, and prints the median and the worst.

use std::time::Instant;

use wharf_testkit::TestDb;

use super::*;

#[tokio::test]
#[ignore = "a measurement (fills a million actions, about ten seconds); run by name with --ignored"]
async fn measure() {
    let n: i64 = std::env::var("WHARF_CONSOLE_ACTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let db = TestDb::new().await;
    seed_inbox(&db).await;
    let filled = Instant::now();
    // Ended actions into wharf.action_ended, live ones into wharf.action_live, every key into
    // wharf.action_key, as enqueues and endings leave them (0060).
    sqlx::query(
        "WITH rows AS MATERIALIZED (
         SELECT g, 'noop' AS kind, 'lane-' || (g % 10000) AS lane_key, 'm-' || g AS key,
                sha256(g::text::bytea) AS digest, s.state, s.reason, s.ended,
                CASE WHEN s.ended THEN 1 ELSE 0 END AS attempt,
                now() - interval '1 minute' AS run_at,
                now() - ($1 - g) * interval '300 milliseconds' AS created_at,
                CASE WHEN s.state IN ('FAILED', 'UNCERTAIN') THEN 'provider_5xx' END AS error_code
           FROM generate_series(1, $1) g
           CROSS JOIN LATERAL (SELECT
                CASE WHEN g % 100 = 0 THEN 'ADMITTED' WHEN g % 5000 = 3 THEN 'PROPOSED'
                     WHEN g % 1000 = 1 THEN 'UNCERTAIN' WHEN g % 1000 = 2 THEN 'FAILED'
                     ELSE 'DONE' END AS state) st
           CROSS JOIN LATERAL (SELECT st.state,
                st.state NOT IN ('ADMITTED', 'PROPOSED') AS ended,
                CASE st.state WHEN 'DONE' THEN 'DONE' WHEN 'UNCERTAIN' THEN 'UNCERTAIN_PROVIDER'
                              WHEN 'FAILED' THEN 'ATTEMPTS_EXHAUSTED' END AS reason) s
         ),
         keys AS (
         INSERT INTO wharf.action_key (idempotency_key, action_id, content_digest)
         SELECT key, g, digest FROM rows
         ),
         ended AS (
         INSERT INTO wharf.action_ended (id, kind, tenant_id, project_id, lane_key,
             idempotency_key, content_digest, at_most_once, instance_level, state, stop_reason,
             epoch, attempt, max_attempts, run_at, created_at, ended_at, error_code)
         SELECT g, kind, 'acme', 'p1', lane_key, key, digest, false, false, state, reason, 1,
                attempt, 3, run_at, created_at, created_at, error_code
           FROM rows WHERE ended
         )
         INSERT INTO wharf.action_live (id, kind, tenant_id, project_id, lane_key,
             idempotency_key, content_digest, at_most_once, instance_level, state, attempt,
             max_attempts, payload, run_at, created_at, error_code)
         SELECT g, kind, 'acme', 'p1', lane_key, key, digest, false, false, state, attempt, 3,
                '{\"n\":1}'::jsonb, run_at, created_at, error_code
           FROM rows WHERE NOT ended",
    )
    .bind(n)
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query("SELECT setval('wharf.action_id_seq', $1)")
        .bind(n)
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("ANALYZE wharf.action_live, wharf.action_ended, wharf.action_key")
        .execute(&db.pool)
        .await
        .unwrap();
    println!(
        "filled {n} actions in {:.1} s",
        filled.elapsed().as_secs_f64()
    );

    let base = start(&db).await;
    let ops = Operator::sign_in(&base, "ada", OPERATOR_TOKEN).await;
    let some = n / 2;
    let pages = [
        "".to_owned(),
        "/actions".to_owned(),
        "/actions?state=UNCERTAIN".to_owned(),
        "/actions?state=PROPOSED&tenant=acme&lane=lane-3".to_owned(),
        format!("/actions?key=m-{some}"),
        format!("/actions?below={some}"),
        format!("/actions/{some}"),
        "/lanes".to_owned(),
        "/lanes?lane=lane-0".to_owned(),
        "/in-doubt".to_owned(),
        "/dead-letters?tenant=acme&project=p1".to_owned(),
        "/inbox".to_owned(),
        "/inbox/acme".to_owned(),
        "/inbox/acme/p1".to_owned(),
        "/audit".to_owned(),
    ];
    println!("| page | median ms | worst ms |\n|---|---|---|");
    for page in pages {
        let mut ms = Vec::new();
        for _ in 0..7 {
            let t = Instant::now();
            let a = ops.get(&page).await;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(a.status, 200, "{page}: {}", a.body);
        }
        ms.sort_by(f64::total_cmp);
        println!("| `/console{page}` | {:.1} | {:.1} |", ms[3], ms[6]);
    }
}
