//! The plans a lone envelope's statements keep. A group of one locks and reads through a scalar
//! statement (`group_lock_context_one.sql`; `stream_lock.sql` for one stream of several
//! requests) whose generic plan PostgreSQL makes once per connection and keeps: it must find every row by the right index at the table size it was
//! made at, an empty table never analyzed (where every index led by `stream_id` costs the same)
//! or one of a single page (where a scan is cheapest). Not timed: the shape is asserted.

use serde_json::Value;
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use wharf::testing::INBOX_GROUP_BEGIN;

use super::support::*;

const CONTEXT_ONE: &str = include_str!("../../../sql/inbox/group_lock_context_one.sql");
const STREAM_LOCK: &str = include_str!("../../../sql/inbox/stream_lock.sql");

/// The stream's unique key, by which the lock and the snapshot's read find its row.
const STREAM_KEY: &str = "inbox_streams_tenant_id_project_id_producer_kind_producer_i_key";

/// The index of each branch of `group_lock_context_one.sql`, in the statement's order: the
/// stream row (read from the locked CTE, no index of its own), the identity probes by event id,
/// idempotency key and sequence, the run beyond the cursor, the credential and the key.
const CONTEXT_INDEXES: [Option<&str>; 7] = [
    None,
    Some("inbox_identities_stream_id_event_id_key"),
    Some("inbox_identities_stream_id_idempotency_key_key"),
    Some("inbox_identities_stream_id_producer_sequence_key"),
    Some("inbox_identities_stream_id_producer_sequence_key"),
    Some("inbox_credentials_pkey"),
    Some("inbox_keys_pkey"),
];

/// Every index named under `plan`, depth first.
fn indexes(plan: &Value, found: &mut Vec<String>) {
    if let Some(name) = plan.get("Index Name").and_then(Value::as_str) {
        found.push(name.to_owned());
    }
    for child in plan
        .get("Plans")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        indexes(child, found);
    }
}

/// The generic plan of `sql` in a transaction started as a group's is (sequential scans off,
/// `INBOX_GROUP_BEGIN`), as EXPLAIN's JSON.
async fn generic_plan(conn: &mut PgConnection, name: &str, sql: &str, execute: &str) -> Value {
    let mut tx = conn.begin_with(INBOX_GROUP_BEGIN).await.unwrap();
    sqlx::raw_sql(AssertSqlSafe(
        "SET LOCAL plan_cache_mode = force_generic_plan",
    ))
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("PREPARE {name} AS {sql}")))
        .execute(&mut *tx)
        .await
        .unwrap();
    let plan: Value = sqlx::query_scalar(AssertSqlSafe(format!(
        "EXPLAIN (FORMAT JSON) EXECUTE {name}{execute}"
    )))
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    plan[0]["Plan"].clone()
}

/// Asserts the lock-and-read's probes, branch by branch, its two reads of the stream, and the
/// lock's, in the plans made now.
async fn assert_plans(conn: &mut PgConnection, when: &str) {
    let context = generic_plan(
        conn,
        &format!("context_{when}"),
        CONTEXT_ONE,
        "('acme', 'web', 'device', 'dev-1', '01ARZ3NDEKTSV4RRFFQ69G5FAV', 'k-1', '5', 64, 1, \
         'acme', 'web', 'key-1')",
    )
    .await;
    let text = context.to_string();
    assert!(
        !text.contains("Seq Scan"),
        "{when}: the statement scans: {text}"
    );
    let children = context["Plans"]
        .as_array()
        .expect("an Append with its CTEs");
    let (branches, ctes): (Vec<&Value>, Vec<&Value>) = children
        .iter()
        .partition(|c| c["Parent Relationship"] == "Member");
    assert_eq!(branches.len(), CONTEXT_INDEXES.len(), "{when}: {text}");
    for (branch, expected) in branches.iter().zip(CONTEXT_INDEXES) {
        let mut found = Vec::new();
        indexes(branch, &mut found);
        assert_eq!(found, Vec::from_iter(expected), "{when}: {branch}");
    }
    // The locked row and the row the snapshot sees: each by the stream's key.
    let mut found = Vec::new();
    for cte in &ctes {
        indexes(cte, &mut found);
    }
    assert_eq!(found, [STREAM_KEY, STREAM_KEY], "{when}: {text}");

    let lock = generic_plan(
        conn,
        &format!("lock_{when}"),
        STREAM_LOCK,
        "('acme', 'web', 'device', 'dev-1')",
    )
    .await;
    let mut found = Vec::new();
    indexes(&lock, &mut found);
    assert_eq!(found, [STREAM_KEY], "{when}: {lock}");
}

#[tokio::test]
async fn a_lone_envelope_finds_its_rows_by_their_own_indexes_whatever_the_tables_size_was() {
    let fx = Fx::new().await;
    let mut conn = fx.pool().acquire().await.unwrap();

    // A fresh install: nothing stored, nothing analyzed.
    assert_plans(&mut conn, "empty").await;

    // A few envelopes, then statistics of a one-page table: the size where a scan is cheapest.
    for seq in 1..=3 {
        let answer = fx.send(&fx.body(seq)).await;
        assert_eq!(answer.acknowledged_sequence, Some(seq), "{}", answer.reason);
    }
    sqlx::raw_sql(AssertSqlSafe(
        "VACUUM ANALYZE wharf.inbox_identities, wharf.inbox_streams, wharf.inbox_credentials, \
         wharf.inbox_keys",
    ))
    .execute(&mut *conn)
    .await
    .unwrap();
    let pages: i32 = sqlx::query_scalar(
        "SELECT relpages FROM pg_class WHERE oid = 'wharf.inbox_identities'::regclass",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert_eq!(pages, 1, "the identities fit one page");
    assert_plans(&mut conn, "one_page").await;
}
