//! Dead letters: explicit scope, keyset pages of at most 100, nothing skipped or repeated while
//! failures arrive, stable fields only.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;
use wharf::outbound::{self, Cursor, DEAD_LETTERS_PAGE_ITEMS_MAX, Error, Page};
use wharf::outbox::StopReason;
use wharf_testkit::TestDb;

/// Inserts `n` ended actions of (tenant, project) in `state`, ending 1 ms apart from `from`.
/// Ad-hoc SQL on purpose: hundreds of failures through the executor would test the executor.
async fn ended(
    pool: &PgPool,
    tenant: &str,
    project: &str,
    state: &str,
    n: i32,
    from: DateTime<Utc>,
) -> Vec<i64> {
    let reason = match state {
        "FAILED" => "ATTEMPTS_EXHAUSTED",
        "DONE" => "DONE",
        "UNCERTAIN" => "UNCERTAIN_PROVIDER",
        _ => "OPERATOR",
    };
    sqlx::query_scalar(
        "INSERT INTO wharf.action_ended (id, kind, tenant_id, project_id, lane_key,
                                         idempotency_key, content_digest, at_most_once,
                                         instance_level, state, stop_reason, epoch,
                                         max_attempts, attempt, run_at, created_at, ended_at,
                                         error_code)
         SELECT nextval('wharf.action_id_seq'), 'envelope', $1, $2, 'lane-' || g, k,
                sha256(convert_to(k, 'UTF8')), false, false, $3, $4, 3, 3, 3, $5, $5,
                $5 + g * interval '1 millisecond', 'http_503'
           FROM (SELECT g, 'k-' || g || '-' || gen_random_uuid() AS k
                   FROM generate_series(1, $6) g) keyed
          ORDER BY g
         RETURNING id",
    )
    .bind(tenant)
    .bind(project)
    .bind(state)
    .bind(reason)
    .bind(from)
    .bind(n)
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn page(pool: &PgPool, after: Option<&Cursor>, limit: Option<u32>) -> Page {
    outbound::dead_letters(pool, "acme", "web", after, limit)
        .await
        .unwrap()
}

#[tokio::test]
async fn pages_of_100_100_50_cover_every_row_once() {
    let db = TestDb::new().await;
    let t0 = Utc::now() - Duration::hours(1);
    let mut ids = ended(&db.pool, "acme", "web", "FAILED", 250, t0).await;
    // Ids and end times rise together here, so id order is the page order.
    ids.sort();
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut after = None;
    loop {
        let p = page(&db.pool, after.as_ref(), None).await;
        sizes.push(p.items.len());
        seen.extend(p.items.iter().map(|d| d.id));
        match p.next {
            Some(next) => after = Some(next.to_string().parse::<Cursor>().unwrap()),
            None => break,
        }
    }
    assert_eq!(sizes, vec![100, 100, 50]);
    assert_eq!(seen, ids, "oldest failure first, each exactly once");
}

#[tokio::test]
async fn paging_while_failures_arrive_skips_and_repeats_nothing() {
    let db = TestDb::new().await;
    let t0 = Utc::now() - Duration::hours(1);
    let original: HashSet<i64> = ended(&db.pool, "acme", "web", "FAILED", 250, t0)
        .await
        .into_iter()
        .collect();
    let mut arrived = HashSet::new();
    let mut seen = Vec::new();
    let mut after: Option<Cursor> = None;
    for round in 0.. {
        assert!(round < 20, "paging must end");
        let p = page(&db.pool, after.as_ref(), None).await;
        assert!(p.items.len() <= DEAD_LETTERS_PAGE_ITEMS_MAX as usize);
        seen.extend(p.items.iter().map(|d| d.id));
        // Between pages: new failures in this scope (after everything so far), failures in
        // other scopes, and actions that ended otherwise in this scope.
        if round < 3 {
            let now = Utc::now() + Duration::minutes(round);
            arrived.extend(ended(&db.pool, "acme", "web", "FAILED", 30, now).await);
            ended(&db.pool, "acme", "app", "FAILED", 10, t0).await;
            ended(&db.pool, "other", "web", "FAILED", 10, t0).await;
            ended(&db.pool, "acme", "web", "DONE", 10, t0).await;
            ended(&db.pool, "acme", "web", "UNCERTAIN", 10, t0).await;
            ended(&db.pool, "acme", "web", "CANCELLED", 10, t0).await;
        }
        match p.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let unique: HashSet<i64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "no row twice");
    assert!(original.is_subset(&unique), "no original row skipped");
    assert_eq!(
        unique,
        &original | &arrived,
        "later failures of the scope, nothing else"
    );
}

#[tokio::test]
async fn a_tenant_never_sees_another_scope() {
    let db = TestDb::new().await;
    let t0 = Utc::now() - Duration::hours(1);
    let mine = ended(&db.pool, "acme", "web", "FAILED", 3, t0).await;
    let other_tenant = ended(&db.pool, "acme2", "web", "FAILED", 3, t0).await;
    let other_project = ended(&db.pool, "acme", "web2", "FAILED", 3, t0).await;
    let ids = |p: Page| p.items.into_iter().map(|d| d.id).collect::<Vec<_>>();
    assert_eq!(ids(page(&db.pool, None, None).await), mine);
    let p = outbound::dead_letters(&db.pool, "acme2", "web", None, None)
        .await
        .unwrap();
    assert_eq!(ids(p), other_tenant);
    let p = outbound::dead_letters(&db.pool, "acme", "web2", None, None)
        .await
        .unwrap();
    assert_eq!(ids(p), other_project);
    let p = outbound::dead_letters(&db.pool, "nobody", "web", None, None)
        .await
        .unwrap();
    assert!(p.items.is_empty() && p.next.is_none());
    // A cursor from one scope used in another only positions; it never widens the scope.
    let first = page(&db.pool, None, Some(1)).await.next.unwrap();
    let p = outbound::dead_letters(&db.pool, "acme2", "web", Some(&first), None)
        .await
        .unwrap();
    assert!(ids(p).iter().all(|id| other_tenant.contains(id)));
}

#[tokio::test]
async fn limits_scope_and_cursor_are_checked() {
    let db = TestDb::new().await;
    ended(
        &db.pool,
        "acme",
        "web",
        "FAILED",
        101,
        Utc::now() - Duration::hours(1),
    )
    .await;
    let invalid = |r: Result<Page, Error>, field: &str| match r {
        Err(Error::Invalid { field: f, .. }) => assert_eq!(f, field),
        other => panic!("{field}: {other:?}"),
    };
    let dl = |tenant: &'static str, project: &'static str, limit: Option<u32>| {
        let pool = db.pool.clone();
        async move { outbound::dead_letters(&pool, tenant, project, None, limit).await }
    };
    invalid(dl("acme", "web", Some(0)).await, "limit");
    invalid(dl("acme", "web", Some(101)).await, "limit");
    invalid(dl("", "web", None).await, "tenant");
    invalid(dl("acme", "", None).await, "project");
    let long = "t".repeat(257);
    invalid(
        outbound::dead_letters(&db.pool, &long, "web", None, None).await,
        "tenant",
    );
    let one = dl("acme", "web", Some(1)).await.unwrap();
    assert_eq!(one.items.len(), 1);
    assert!(one.next.is_some());
    let full = dl("acme", "web", Some(100)).await.unwrap();
    assert_eq!(full.items.len(), 100);
    assert!(full.next.is_some());
    let default = dl("acme", "web", None).await.unwrap();
    assert_eq!(default, full, "the default is the maximum");
    let rest = page(&db.pool, full.next.as_ref(), Some(100)).await;
    assert_eq!(rest.items.len(), 1);
    assert!(rest.next.is_none());
    assert!(matches!(
        "garbage".parse::<Cursor>(),
        Err(Error::InvalidCursor)
    ));
}

#[tokio::test]
async fn a_dead_letter_shows_stable_fields_only() {
    let db = TestDb::new().await;
    ended(&db.pool, "acme", "web", "FAILED", 1, Utc::now()).await;
    let p = page(&db.pool, None, None).await;
    let letter = &p.items[0];
    assert_eq!(letter.stop_reason, StopReason::AttemptsExhausted);
    assert_eq!(letter.error_code.as_deref(), Some("http_503"));
    assert_eq!(letter.attempt, 3);
    let json = serde_json::to_value(&p).unwrap();
    let mut keys: Vec<&str> = json["items"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "attempt",
            "ended_at",
            "error_code",
            "id",
            "idempotency_key",
            "kind",
            "lane_key",
            "stop_reason"
        ]
    );
    assert_eq!(json["items"][0]["stop_reason"], "ATTEMPTS_EXHAUSTED");
    assert!(json["next"].is_null());
}
