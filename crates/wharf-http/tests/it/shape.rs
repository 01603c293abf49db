//! Every answer the server gives that is not a success is `{"code","reason","correlation_id"}`
//! JSON (issue 11, defect 6): path-extractor failures, body rejections, a body over its limit,
//! unknown routes, wrong methods, `/readyz` when not ready, and the start-up gate.

use std::sync::Arc;

use serde_json::Value;
use wharf_http::auth::OperatorToken;
use wharf_testkit::TestDb;

use crate::support::{http, serve};

/// Asserts the one error shape, with the header's correlation id in the body; returns the body.
async fn error_shape(response: reqwest::Response, status: u16, code: &str) -> Value {
    assert_eq!(response.status().as_u16(), status, "{response:?}");
    assert_eq!(
        response.headers()["content-type"],
        "application/json",
        "{response:?}"
    );
    let header = response.headers()["x-correlation-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = response.json().await.unwrap();
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(keys, ["code", "correlation_id", "reason"], "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["correlation_id"], header.as_str(), "{body}");
    assert!(
        body["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{body}"
    );
    body
}

async fn full_app(db: &TestDb) -> String {
    let token = OperatorToken::new(Some("op".into()));
    let inbox = Arc::new(wharf::inbox::Inbox::new(
        db.pool.clone(),
        wharf::inbox::InboxConfig::default(),
    ));
    serve(wharf_http::app([
        wharf_http::health::routes(db.pool.clone(), None),
        wharf_http::openapi::routes(),
        wharf_http::actions::routes(
            db.pool.clone(),
            Arc::new(wharf::outbox::Registry::new()),
            token.clone(),
        ),
        wharf_http::dead_letters::routes(db.pool.clone(), token),
        wharf_http::ingest::routes(inbox),
    ]))
    .await
}

#[tokio::test]
async fn extractor_failures_unknown_routes_and_wrong_methods_answer_the_one_shape() {
    let db = TestDb::new().await;
    let base = full_app(&db).await;
    let client = http();

    for id in ["abc", "1.5", "99999999999999999999", "%00", "-"] {
        let response = client
            .get(format!("{base}/v1/actions/{id}"))
            .bearer_auth("op")
            .send()
            .await
            .unwrap();
        let body = error_shape(response, 400, "invalid-request").await;
        assert!(body["reason"].as_str().unwrap().contains("`id`"), "{body}");
        for verb in ["admit", "refuse"] {
            let response = client
                .post(format!("{base}/v1/actions/{id}/{verb}"))
                .bearer_auth("op")
                .send()
                .await
                .unwrap();
            error_shape(response, 400, "invalid-request").await;
        }
    }
    // An integer that names nothing is a 404 in the same shape.
    let response = client
        .get(format!("{base}/v1/actions/-1"))
        .bearer_auth("op")
        .send()
        .await
        .unwrap();
    error_shape(response, 404, "not-found").await;

    for path in [
        "/",
        "/nope",
        "/v1/action",
        "/v1/actions/1/extra",
        "/v1/tenants/a",
    ] {
        let response = client.get(format!("{base}{path}")).send().await.unwrap();
        error_shape(response, 404, "not-found").await;
    }

    for (method, path, allow) in [
        (reqwest::Method::DELETE, "/v1/actions", "POST,GET,HEAD"),
        (reqwest::Method::GET, "/v1/actions/1/admit", "POST"),
        (reqwest::Method::PUT, "/healthz", "GET,HEAD"),
        (
            reqwest::Method::GET,
            "/v1/tenants/a/projects/b/envelopes",
            "POST",
        ),
        (reqwest::Method::POST, "/v1/subjects/x/actions", "DELETE"),
    ] {
        let response = client
            .request(method.clone(), format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.headers()["allow"],
            allow,
            "{method} {path}: {response:?}"
        );
        error_shape(response, 405, "method-not-allowed").await;
    }

    // A body that is not the enqueue request, and one over the admin limit.
    let response = client
        .post(format!("{base}/v1/actions"))
        .bearer_auth("op")
        .body("{not json")
        .send()
        .await
        .unwrap();
    error_shape(response, 400, "invalid-request").await;
    let response = client
        .post(format!("{base}/v1/actions"))
        .bearer_auth("op")
        .body(vec![b' '; wharf_http::actions::ENQUEUE_BODY_BYTES_MAX + 1])
        .send()
        .await
        .unwrap();
    let body = error_shape(response, 413, "payload-too-large").await;
    assert_eq!(body["reason"], "body-too-large");

    // A subject that PostgreSQL could not store, before any SQL; a query it cannot parse.
    let response = client
        .delete(format!("{base}/v1/subjects/a%00b/actions"))
        .bearer_auth("op")
        .send()
        .await
        .unwrap();
    let body = error_shape(response, 400, "invalid-request").await;
    assert!(body["reason"].as_str().unwrap().contains("NUL"), "{body}");
    let response = client
        .get(format!(
            "{base}/v1/tenants/a/projects/b/dead-letters?limit=many"
        ))
        .bearer_auth("op")
        .send()
        .await
        .unwrap();
    error_shape(response, 400, "invalid-request").await;

    // Metrics that are not enabled.
    let response = client.get(format!("{base}/metrics")).send().await.unwrap();
    error_shape(response, 404, "not-found").await;
}

#[tokio::test]
async fn readyz_without_a_database_is_the_one_shape() {
    // A pool on a port where nothing listens: lazily connected, so it only fails when used.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(std::time::Duration::from_millis(500))
        .connect_lazy(&format!("postgres://nobody@127.0.0.1:{port}/none"))
        .unwrap();
    let base = serve(wharf_http::app([wharf_http::health::routes(pool, None)])).await;
    let healthz = http().get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(healthz.status(), 200);
    assert_eq!(healthz.text().await.unwrap(), "ok\n");
    let response = http().get(format!("{base}/readyz")).send().await.unwrap();
    error_shape(response, 503, "not-ready").await;
}

#[tokio::test]
async fn the_start_up_gate_answers_healthz_then_hands_over() {
    let db = TestDb::new().await;
    let startup = wharf_http::health::Startup::new("waiting for PostgreSQL at 127.0.0.1:1");
    let base = serve(startup.router()).await;
    let client = http();
    let healthz = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(healthz.status(), 200);
    assert_eq!(healthz.text().await.unwrap(), "ok\n");
    startup.waiting_for("waiting for PostgreSQL at 127.0.0.1:1 (attempt 3: refused)");
    for path in ["/readyz", "/v1/actions/1", "/metrics", "/nope"] {
        let response = client.get(format!("{base}{path}")).send().await.unwrap();
        let body = error_shape(response, 503, "starting").await;
        assert!(
            body["reason"].as_str().unwrap().contains("attempt 3"),
            "{body}"
        );
    }
    assert!(!startup.is_ready());
    startup.ready(wharf_http::app([wharf_http::health::routes(
        db.pool.clone(),
        None,
    )]));
    let ready = client.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let response = client.get(format!("{base}/nope")).send().await.unwrap();
    error_shape(response, 404, "not-found").await;
}
