//! A 503 says only what is known of the write (issue 11, defect 1): `outcome-unknown` when the
//! connection died while the COMMIT was in flight — and the write had in fact committed — and
//! `unavailable` ("nothing was committed") only when that is true. Real PostgreSQL, a real
//! proxy cutting real connections, a real COMMIT refused by the server, and a backend
//! terminated in the middle of its COMMIT.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wharf::outbox::Registry;
use wharf_http::auth::OperatorToken;
use wharf_http::error::{CODE_OUTCOME_UNKNOWN, CODE_UNAVAILABLE};
use wharf_testkit::TestDb;

use crate::support::{COMMIT_MESSAGE, Cut, Noop, Proxy, http, serve};

const TOKEN: &str = "operator-secret";

/// The admin routes over `pool`.
async fn admin(pool: sqlx::PgPool) -> String {
    let mut registry = Registry::new();
    registry.register(Arc::new(Noop)).unwrap();
    serve(wharf_http::app([wharf_http::actions::routes(
        pool,
        Arc::new(registry),
        OperatorToken::new(Some(TOKEN.into())),
    )]))
    .await
}

async fn enqueue(base: &str, key: &str) -> (u16, Value) {
    let body = json!({"kind": "noop", "tenant_id": "t1", "lane_key": "lane-1",
                      "idempotency_key": key, "payload": {"n": 1}});
    let response = http()
        .post(format!("{base}/v1/actions"))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn actions(db: &TestDb) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM wharf.action")
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_commit_whose_answer_was_lost_is_outcome_unknown_and_the_retry_finds_it() {
    let db = TestDb::new().await;
    let proxy = Proxy::start(&db.url()).await;
    let base = admin(proxy.pool(&db.url(), 2).await).await;

    proxy.arm(COMMIT_MESSAGE, Cut::After);
    let (status, body) = enqueue(&base, "lost-answer").await;
    assert_eq!(proxy.sprung(), 1, "the COMMIT went through the proxy");
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some(CODE_OUTCOME_UNKNOWN)),
        "{body}"
    );
    let reason = body["reason"].as_str().unwrap();
    assert!(reason.contains("outcome is unknown"), "{reason}");
    assert!(reason.contains("same idempotency key"), "{reason}");
    assert!(!reason.contains("nothing was committed"), "{reason}");

    // It had committed: exactly what the old answer denied.
    assert_eq!(actions(&db).await, 1);
    let (status, again) = enqueue(&base, "lost-answer").await;
    assert_eq!(status, 200, "the retry finds the committed action: {again}");
    let created: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT created_at FROM wharf.action")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(again["created_at"], json!(created));
}

#[tokio::test]
async fn a_connection_lost_before_commit_is_nothing_committed_and_true() {
    let db = TestDb::new().await;
    let proxy = Proxy::start(&db.url()).await;
    let base = admin(proxy.pool(&db.url(), 2).await).await;

    proxy.arm(b"INSERT INTO wharf.action", Cut::Before);
    let (status, body) = enqueue(&base, "lost-insert").await;
    assert_eq!(proxy.sprung(), 1);
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some(CODE_UNAVAILABLE)),
        "{body}"
    );
    assert!(
        body["reason"]
            .as_str()
            .unwrap()
            .contains("nothing was committed")
    );
    assert_eq!(
        actions(&db).await,
        0,
        "nothing was committed, as the answer says"
    );
    let (status, created) = enqueue(&base, "lost-insert").await;
    assert_eq!(status, 201, "the retry creates it: {created}");
}

/// A deferred constraint trigger that refuses at COMMIT (or sleeps there), for the two tests
/// below. Keys starting with `refuse-at-commit` fail; `sleep-at-commit` sleep while
/// `public.sleep_at_commit` says so.
async fn install_commit_trigger(db: &TestDb) {
    for sql in [
        "CREATE TABLE public.sleep_at_commit (on_ boolean NOT NULL)",
        "INSERT INTO public.sleep_at_commit VALUES (true)",
        "CREATE FUNCTION public.at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.idempotency_key LIKE 'refuse-at-commit%' THEN
             RAISE EXCEPTION 'refused at commit';
           END IF;
           IF NEW.idempotency_key LIKE 'sleep-at-commit%'
              AND (SELECT on_ FROM public.sleep_at_commit) THEN
             PERFORM pg_sleep(30);
           END IF;
           RETURN NULL;
         END $$",
        "CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON wharf.action_live
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.at_commit()",
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&db.pool)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_commit_the_server_refuses_is_nothing_committed() {
    let db = TestDb::new().await;
    install_commit_trigger(&db).await;
    let base = admin(db.pool.clone()).await;
    for _ in 0..2 {
        let (status, body) = enqueue(&base, "refuse-at-commit-1").await;
        assert_eq!(
            (status, body["code"].as_str()),
            (503, Some(CODE_UNAVAILABLE)),
            "{body}"
        );
        assert_eq!(actions(&db).await, 0);
    }
    // The server's ERROR left the pooled connection usable.
    let (status, _) = enqueue(&base, "fine").await;
    assert_eq!(status, 201);
}

#[tokio::test]
async fn a_backend_terminated_during_its_commit_is_outcome_unknown() {
    let db = TestDb::new().await;
    install_commit_trigger(&db).await;
    let base = admin(db.another_pool(2).await).await;
    let request = tokio::spawn({
        let base = base.clone();
        async move { enqueue(&base, "sleep-at-commit-1").await }
    });
    // Find the backend sleeping inside its COMMIT, and terminate it from another connection.
    let started = std::time::Instant::now();
    let terminated = loop {
        let done: Option<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event = 'PgSleep'
               AND pid <> pg_backend_pid()",
        )
        .fetch_optional(&db.pool)
        .await
        .unwrap();
        if let Some(done) = done {
            break done;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no backend reached the COMMIT"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(terminated);
    let (status, body) = request.await.unwrap();
    // The server's FATAL may follow a durable commit, so the answer may not claim otherwise.
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some(CODE_OUTCOME_UNKNOWN)),
        "{body}"
    );
    // Here it had not committed; the retry with the same key tells, and creates it.
    sqlx::query("UPDATE public.sleep_at_commit SET on_ = false")
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(actions(&db).await, 0);
    let (status, _) = enqueue(&base, "sleep-at-commit-1").await;
    assert_eq!(status, 201);
}

#[tokio::test]
async fn an_ingest_whose_commit_answer_was_lost_is_outcome_unknown_then_a_duplicate() {
    use wharf::inbox::{self, Inbox, InboxConfig, LimitPolicy};

    let db = TestDb::new().await;
    inbox::create_tenant(&db.pool, "acme").await.unwrap();
    let credential = inbox::issue_credential(&db.pool, "acme", "alice", Some("laptop-1"))
        .await
        .unwrap();
    let key = inbox::generate_key(
        &db.pool,
        "acme",
        "web",
        Some("k1"),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();
    let proxy = Proxy::start(&db.url()).await;
    let inbox = Arc::new(Inbox::new(
        proxy.pool(&db.url(), 2).await,
        InboxConfig {
            peer_limit: LimitPolicy::UNLIMITED,
            identity_limit: LimitPolicy::UNLIMITED,
            ..InboxConfig::default()
        },
    ));
    let base = serve(wharf_http::app([wharf_http::ingest::routes(inbox)])).await;
    let mut config = wharf_client::ProducerConfig::new(
        base.clone(),
        "acme",
        "web",
        credential.token.clone(),
        key.key_id.clone(),
        key.private_seed,
    );
    config.attempts_max = 1;
    let producer = wharf_client::Producer::new(config, 1).unwrap();
    let envelope = producer
        .envelope(
            "sync_cursor",
            json!({"producer_id": "laptop-1", "acknowledged_sequence": 0,
                   "acknowledged_event_id": null, "version": 1}),
            None,
        )
        .unwrap();
    let post = || {
        http()
            .post(format!("{base}/v1/tenants/acme/projects/web/envelopes"))
            .bearer_auth(&credential.token)
            .body(envelope.to_canonical_json().unwrap())
            .send()
    };
    proxy.arm(COMMIT_MESSAGE, Cut::After);
    let response = post().await.unwrap();
    assert_eq!(proxy.sprung(), 1);
    assert_eq!(response.status().as_u16(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], CODE_OUTCOME_UNKNOWN, "{body}");
    let identities: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.inbox_identities")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(identities, 1, "the envelope had committed");
    let response = post().await.unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["outcome"], "ignore-duplicate", "{body}");
}
