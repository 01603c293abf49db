//! The plans of the statements that change a batch of claimed rows, under the statistics that
//! once made them slow: taken while every row was ADMITTED (a bench's ANALYZE after enqueue, a
//! quiet moment); and the claim's generic plan, made on an empty table. Not timed: the plan's
//! shape is asserted, the speed is the benchmarks' business.

use wharf_testkit::TestDb;

const COMPLETE: &str = concat!(
    "EXPLAIN (FORMAT JSON) ",
    include_str!("../../../sql/outbox/complete.sql")
);
const RELEASE: &str = concat!(
    "EXPLAIN (FORMAT JSON) ",
    include_str!("../../../sql/outbox/release.sql")
);
const BEGIN_WRITE: &str = concat!(
    "EXPLAIN (FORMAT JSON) ",
    include_str!("../../../sql/outbox/begin_write.sql")
);

/// Indexes that must not drive a batch statement: walking every running action (and every dead
/// entry left behind) per batch entry is what made completions take seconds.
const WRONG_INDEXES: [&str; 2] = ["ux_action_lane_executing", "ix_action_lease"];

/// Asserts that `plan` (EXPLAIN's JSON) finds its rows by primary key and by nothing else.
fn assert_by_primary_key(name: &str, plan: &serde_json::Value) {
    let plan = plan.to_string();
    assert!(plan.contains("action_pkey"), "{name}: {plan}");
    for index in WRONG_INDEXES {
        assert!(!plan.contains(index), "{name} walks {index}: {plan}");
    }
    assert!(
        !plan.contains("Join Filter"),
        "{name} joins by filter: {plan}"
    );
    assert!(!plan.contains("Seq Scan"), "{name} scans the table: {plan}");
}

/// 20,000 ADMITTED actions of kind `k`, one lane each, due since a second ago.
async fn admit_20000(pool: &sqlx::PgPool) {
    sqlx::query(
        "INSERT INTO wharf.action_live (kind, tenant_id, lane_key, idempotency_key, content_digest,
                                   at_most_once, instance_level, state, max_attempts, payload,
                                   run_at)
         SELECT 'k', 't', 'lane-' || g, 'key-' || g, sha256(g::text::bytea), false, false,
                'ADMITTED', 3, '{}', now() - interval '1 second'
           FROM generate_series(1, 20000) g",
    )
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn batch_statements_find_their_rows_by_primary_key_under_stale_statistics() {
    let db = TestDb::new().await;
    // 20,000 ADMITTED actions, one lane each, analyzed as they are: nothing EXECUTING.
    admit_20000(&db.pool).await;
    sqlx::query("ANALYZE wharf.action_live")
        .execute(&db.pool)
        .await
        .unwrap();
    // Then 200 of them are claimed, as the executor would.
    let (ids, epochs): (Vec<i64>, Vec<i64>) = sqlx::query_as(
        "WITH c AS (
             UPDATE wharf.action_live SET state = 'EXECUTING', epoch = epoch + 1, attempt = 1,
                                     lease_expires_at = now() + interval '30 seconds'
              WHERE id IN (SELECT id FROM wharf.action ORDER BY id LIMIT 200)
             RETURNING id, epoch)
         SELECT array_agg(id ORDER BY id), array_agg(epoch ORDER BY id) FROM c",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(ids.len(), 200);
    let n = ids.len();

    let no_time = None::<chrono::DateTime<chrono::Utc>>;

    let plan: serde_json::Value = sqlx::query_scalar(COMPLETE)
        .bind(&ids)
        .bind(&epochs)
        .bind(vec!["DONE"; n])
        .bind(vec![Some("DONE"); n])
        .bind(vec![None::<String>; n])
        .bind(vec![None::<String>; n])
        .bind(vec![0i64; n])
        .bind(vec![0i32; n])
        .bind(vec![false; n])
        .bind(no_time)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_by_primary_key("complete", &plan);

    let plan: serde_json::Value = sqlx::query_scalar(RELEASE)
        .bind(&ids)
        .bind(&epochs)
        .bind(vec![false; n])
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_by_primary_key("release", &plan);

    let plan: serde_json::Value = sqlx::query_scalar(BEGIN_WRITE)
        .bind(&ids)
        .bind(&epochs)
        .bind(1000i64)
        .bind(no_time)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_by_primary_key("begin_write", &plan);
}

/// The claim as the executor's claim pool runs it: prepared once, with one generic plan.
const PREPARE_CLAIM: &str = concat!(
    "PREPARE claim_generic (integer, bigint, timestamptz, text[], integer, text[]) AS ",
    include_str!("../../../sql/outbox/claim.sql")
);
const EXPLAIN_CLAIM: &str = "EXPLAIN (FORMAT JSON) EXECUTE claim_generic \
     (100, 30000, NULL, ARRAY['k'], 1000, ARRAY['k'])";

/// Sets `options` for the session of `conn`, as the claim pool's connections have them.
async fn set_session(conn: &mut sqlx::PgConnection, options: &[(&str, &str)]) {
    for (name, value) in options {
        sqlx::query("SELECT set_config($1, $2, false)")
            .bind(name)
            .bind(value)
            .execute(&mut *conn)
            .await
            .unwrap();
    }
}

/// The claim's generic plan on a connection with `options` set, prepared while the table is
/// empty and analyzed as such (a fresh install, a drained queue), explained then and again once
/// 20,000 due rows have arrived (no ANALYZE in between, so the plan is the one made empty).
async fn claim_plans_made_empty(options: &[(&str, &str)]) -> (String, String) {
    let db = TestDb::new().await;
    let mut conn = db.pool.acquire().await.unwrap();
    set_session(&mut conn, options).await;
    sqlx::query("ANALYZE wharf.action_live")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query(PREPARE_CLAIM)
        .execute(&mut *conn)
        .await
        .unwrap();
    let empty: serde_json::Value = sqlx::query_scalar(EXPLAIN_CLAIM)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    admit_20000(&db.pool).await;
    let grown: serde_json::Value = sqlx::query_scalar(EXPLAIN_CLAIM)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    (empty.to_string(), grown.to_string())
}

/// Calls `check` on `node` (a node of EXPLAIN's JSON plan) and on every node below it.
fn each_plan_node(node: &serde_json::Value, check: &mut impl FnMut(&serde_json::Value)) {
    check(node);
    for child in node
        .get("Plans")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
    {
        each_plan_node(child, check);
    }
}

/// Every index scan in `node` and below has an index condition: none walks its index whole.
fn assert_no_index_walked_whole(name: &str, node: &serde_json::Value, whole: &str) {
    each_plan_node(node, &mut |node| {
        if let Some(index) = node.get("Index Name") {
            assert!(
                node.get("Index Cond").is_some(),
                "{name} walks {index} whole: {whole}"
            );
        }
    });
}

/// What the claim's plan must be, whatever the statistics: the lease index in lease order, the
/// due index in run_at order, the primary key for the look-up and the update, the two lane
/// indexes for the probes, each with a condition, and nothing that reads the whole table, all
/// its candidates, or compares rows with rows by a join filter.
fn assert_claim_shape(name: &str, plan: &str) {
    let json: serde_json::Value = serde_json::from_str(plan).unwrap();
    assert_no_index_walked_whole(name, &json[0]["Plan"], plan);
    for index in [
        "ix_action_lease",
        "ix_action_due",
        "action_pkey",
        "ux_action_lane_executing",
        "ix_action_lane_pending",
    ] {
        assert!(plan.contains(index), "{name} does not use {index}: {plan}");
    }
    for node in ["Seq Scan", "Hash", "Sort", "Merge", "Bitmap", "Join Filter"] {
        assert!(!plan.contains(node), "{name} has a {node}: {plan}");
    }
}

#[tokio::test]
async fn the_claims_generic_plan_made_on_an_empty_table_keeps_the_shape_of_its_text() {
    let (empty, grown) =
        claim_plans_made_empty(&wharf::testing::outbox::CLAIM_SESSION_OPTIONS).await;
    assert_claim_shape("claim, planned empty", &empty);
    assert_claim_shape("claim, planned empty, table grown", &grown);
    // Why the settings are there: a generic plan alone, made empty, scans the table.
    let (bare, _) = claim_plans_made_empty(&[("plan_cache_mode", "force_generic_plan")]).await;
    assert!(bare.contains("Seq Scan"), "{bare}");
}

/// The claim's generic plan made on an empty table whose statistics are left from a backlog of
/// long lanes (`long_lane_statistics_left_on_an_empty_table`), explained again once 20,000 due
/// rows have arrived. Seen on 2026-12-05: the probe for an earlier unstarted action of the lane
/// then walked the primary key below the head (`id < h.id`, lane and state as filters, 6,748
/// rows a probe and growing), because with the lane fixed by equality its ORDER BY reduces to
/// `id`, which the primary key also gives; claims took 300 ms and start latency at 2,000/s
/// reached 30 s. With `p.lane_key = h.lane_key` in the probe (before `9afd09e`) this test fails.
#[tokio::test]
async fn the_claims_generic_plan_made_empty_after_long_lanes_still_probes_the_lane_index() {
    let db = TestDb::new().await;
    long_lane_statistics_left_on_an_empty_table(&db.pool).await;
    let mut conn = db.pool.acquire().await.unwrap();
    set_session(&mut conn, &wharf::testing::outbox::CLAIM_SESSION_OPTIONS).await;
    sqlx::query(PREPARE_CLAIM)
        .execute(&mut *conn)
        .await
        .unwrap();
    // The generic plan is made at the first run, on the empty table.
    sqlx::query(EXPLAIN_CLAIM)
        .execute(&mut *conn)
        .await
        .unwrap();
    admit_20000(&db.pool).await;
    let plan: serde_json::Value = sqlx::query_scalar(EXPLAIN_CLAIM)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_claim_shape("claim, planned empty after long lanes", &plan.to_string());
}

/// 20,000 ADMITTED actions in 20 lanes, analyzed, then TRUNCATEd: the table is empty and its
/// statistics say its lanes are long (a bench's clean, an operator emptying the queue). With
/// 200 lanes of 100 the planner kept the lane index for every probe whatever the text; with 20
/// of 1,000 it took the primary key for each probe that named its lane by equality.
async fn long_lane_statistics_left_on_an_empty_table(pool: &sqlx::PgPool) {
    sqlx::query(
        "INSERT INTO wharf.action_live (kind, tenant_id, lane_key, idempotency_key, content_digest,
                                   at_most_once, instance_level, state, max_attempts, payload,
                                   run_at)
         SELECT 'k', 't', 'lane-' || (g % 20), 'key-' || g, sha256(g::text::bytea), false,
                false, 'ADMITTED', 3, '{}', now() - interval '1 second'
           FROM generate_series(1, 20000) g",
    )
    .execute(pool)
    .await
    .unwrap();
    for statement in ["ANALYZE wharf.action_live", "TRUNCATE wharf.action_live"] {
        sqlx::query(statement).execute(pool).await.unwrap();
    }
}

/// No scan of the primary key in `node` and below walks it by a range of ids: the primary key
/// may find a row by id (`id = …`, `id = ANY (…)`), never stand in for a lane probe.
fn assert_no_primary_key_range(name: &str, node: &serde_json::Value, whole: &str) {
    each_plan_node(node, &mut |node| {
        if node.get("Index Name").and_then(|i| i.as_str()) == Some("action_pkey") {
            let cond = node
                .get("Index Cond")
                .map(|c| c.to_string())
                .unwrap_or_default();
            assert!(
                !cond.contains('<') && !cond.contains('>'),
                "{name} probes a lane by a range of the primary key ({cond}): {whole}"
            );
        }
    });
}

/// The demotion and the capped claim run on the executor's statement pool, where PostgreSQL
/// may switch a prepared statement to its generic plan after five runs. Made generic on an
/// emptied table with statistics left from long lanes (the case that made `claim.sql` walk the
/// primary key below each head), their probes for an earlier unstarted action of the lane must
/// still read the lane index once the table has grown, whatever the planner thought of the
/// primary key. With the probes' lanes named by equality (before this test) both fail.
#[tokio::test]
async fn the_demotion_and_the_capped_claim_probe_lanes_by_the_lane_index_when_generic() {
    let db = TestDb::new().await;
    long_lane_statistics_left_on_an_empty_table(&db.pool).await;
    let mut conn = db.pool.acquire().await.unwrap();
    set_session(
        &mut conn,
        &[("plan_cache_mode", "force_generic_plan"), ("jit", "off")],
    )
    .await;
    let statements = [
        (
            "demotion",
            concat!(
                "PREPARE demotion (integer, timestamptz) AS ",
                include_str!("../../../sql/outbox/demote.sql")
            ),
            "EXECUTE demotion (1000, NULL)",
            "EXPLAIN (FORMAT JSON) EXECUTE demotion (1000, NULL)",
        ),
        (
            "capped claim",
            concat!(
                "PREPARE capped (integer, bigint, timestamptz, text[], integer, text[], text[], \
                 integer[], text[]) AS ",
                include_str!("../../../sql/outbox/claim_capped.sql")
            ),
            "EXECUTE capped (100, 30000, NULL, ARRAY['k'], 1000, ARRAY['k'], ARRAY['t'], \
             ARRAY[5], ARRAY['k'])",
            "EXPLAIN (FORMAT JSON) EXECUTE capped (100, 30000, NULL, ARRAY['k'], 1000, \
             ARRAY['k'], ARRAY['t'], ARRAY[5], ARRAY['k'])",
        ),
    ];
    // Each generic plan is made at its first run, on the empty table.
    for (_, prepare, execute, _) in statements {
        sqlx::query(prepare).execute(&mut *conn).await.unwrap();
        sqlx::query(execute).execute(&mut *conn).await.unwrap();
    }
    admit_20000(&db.pool).await;
    for (name, _, _, explain) in statements {
        let plan: serde_json::Value = sqlx::query_scalar(explain)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        let whole = plan.to_string();
        assert!(
            whole.contains("ix_action_lane_pending"),
            "{name} does not probe the lane index: {whole}"
        );
        assert_no_primary_key_range(name, &plan[0]["Plan"], &whole);
    }
}
