//! The outbox admin endpoints over real HTTP and a real database.

use std::sync::Arc;

use serde_json::{Value, json};
use wharf::outbox::Registry;
use wharf_http::auth::OperatorToken;
use wharf_testkit::TestDb;

use crate::support::{Noop, http, serve};

const TOKEN: &str = "operator-secret";

async fn start(db: &TestDb) -> String {
    let mut registry = Registry::new();
    registry.register(Arc::new(Noop)).unwrap();
    let app = wharf_http::app([wharf_http::actions::routes(
        db.pool.clone(),
        Arc::new(registry),
        OperatorToken::new(Some(TOKEN.into())),
    )]);
    serve(app).await
}

fn request(key: &str) -> Value {
    json!({"kind": "noop", "tenant_id": "t1", "lane_key": "lane-1",
           "idempotency_key": key, "payload": {"n": 1}})
}

/// The fields an action's JSON has, as the API has always answered: the lease, the write mark,
/// the content digest and the kind's flags are the fence's own and never shown; the payload only
/// until the action ends.
const ACTION_FIELDS: [&str; 18] = [
    "attempt",
    "created_at",
    "ended_at",
    "epoch",
    "error_code",
    "expires_at",
    "id",
    "idempotency_key",
    "kind",
    "lane_key",
    "max_attempts",
    "project_id",
    "readback_ref",
    "run_at",
    "state",
    "stop_reason",
    "subject_account_id",
    "tenant_id",
];

/// The field names of an action's JSON, sorted, the payload apart.
fn fields(action: &Value) -> (Vec<&str>, bool) {
    let object = action.as_object().expect("an action is a JSON object");
    let mut names: Vec<&str> = object
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "payload")
        .collect();
    names.sort_unstable();
    (names, object.contains_key("payload"))
}

async fn post(base: &str, path: &str, body: Option<Value>, token: Option<&str>) -> (u16, Value) {
    let mut req = http().post(format!("{base}{path}"));
    if let Some(body) = body {
        req = req.json(&body);
    }
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let response = req.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn enqueue_is_201_then_200_then_409_and_needs_the_operator_token() {
    let db = TestDb::new().await;
    let base = start(&db).await;

    let (status, body) = post(&base, "/v1/actions", Some(request("k1")), None).await;
    assert_eq!(status, 401);
    assert_eq!(body["code"], "unauthorized");
    assert!(
        body["correlation_id"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    );
    let (status, _) = post(&base, "/v1/actions", Some(request("k1")), Some("wrong")).await;
    assert_eq!(status, 401);
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.action")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(count, 0, "an unauthorized request wrote something");

    let (status, first) = post(&base, "/v1/actions", Some(request("k1")), Some(TOKEN)).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["state"], "ADMITTED");
    assert_eq!(first["payload"], json!({"n": 1}));
    assert_eq!(fields(&first), (ACTION_FIELDS.to_vec(), true), "{first}");
    let (status, again) = post(&base, "/v1/actions", Some(request("k1")), Some(TOKEN)).await;
    assert_eq!(status, 200);
    assert_eq!(again["id"], first["id"]);

    let mut different = request("k1");
    different["payload"] = json!({"n": 2});
    let (status, body) = post(&base, "/v1/actions", Some(different), Some(TOKEN)).await;
    assert_eq!(status, 409);
    assert_eq!(body["code"], "idempotency-conflict");

    let id = first["id"].as_i64().unwrap();
    let shown = http()
        .get(format!("{base}/v1/actions/{id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(shown.status(), 200);
    let shown: Value = shown.json().await.unwrap();
    assert_eq!(shown["idempotency_key"], "k1");
    let missing = http()
        .get(format!("{base}/v1/actions/999999"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test]
async fn bad_requests_are_400_with_the_rule_and_write_nothing() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let mut unknown_kind = request("k2");
    unknown_kind["kind"] = json!("nope");
    let mut refused = request("k3");
    refused["payload"] = json!({"refuse": true});
    let mut no_tenant = request("k4");
    no_tenant["tenant_id"] = Value::Null;
    let mut unknown_field = request("k5");
    unknown_field["colour"] = json!("red");
    let mut zero_attempts = request("k6");
    zero_attempts["max_attempts"] = json!(0);
    let mut long_key = request("k7");
    long_key["idempotency_key"] = json!("x".repeat(257));
    for (body, code) in [
        (unknown_kind, "unknown-kind"),
        (refused, "payload-refused"),
        (no_tenant, "invalid-request"),
        (unknown_field, "invalid-request"),
        (zero_attempts, "invalid-request"),
        (long_key, "invalid-request"),
    ] {
        let (status, answer) = post(&base, "/v1/actions", Some(body.clone()), Some(TOKEN)).await;
        assert_eq!(
            (status, answer["code"].as_str()),
            (400, Some(code)),
            "{body}: {answer}"
        );
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.action")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(count, 0);
}

#[tokio::test]
async fn proposals_are_admitted_or_refused_once_and_erasure_deletes() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let mut proposal = request("p1");
    proposal["proposed"] = json!(true);
    proposal["subject_account_id"] = json!("acct-9");
    let (_, created) = post(&base, "/v1/actions", Some(proposal), Some(TOKEN)).await;
    assert_eq!(created["state"], "PROPOSED");
    let id = created["id"].as_i64().unwrap();

    let (status, admitted) =
        post(&base, &format!("/v1/actions/{id}/admit"), None, Some(TOKEN)).await;
    assert_eq!(
        (status, admitted["state"].as_str()),
        (200, Some("ADMITTED"))
    );
    let (status, body) = post(
        &base,
        &format!("/v1/actions/{id}/refuse"),
        None,
        Some(TOKEN),
    )
    .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("not-proposed")));

    let mut other = request("p2");
    other["proposed"] = json!(true);
    let (_, created) = post(&base, "/v1/actions", Some(other), Some(TOKEN)).await;
    let other_id = created["id"].as_i64().unwrap();
    let (status, refused) = post(
        &base,
        &format!("/v1/actions/{other_id}/refuse"),
        None,
        Some(TOKEN),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(refused["state"], "CANCELLED");
    assert_eq!(refused["stop_reason"], "REFUSED");
    assert!(
        refused.get("payload").is_none(),
        "an ended action shows no payload"
    );
    assert_eq!(
        fields(&refused),
        (ACTION_FIELDS.to_vec(), false),
        "{refused}"
    );
    let (status, _) = post(&base, "/v1/actions/424242/admit", None, Some(TOKEN)).await;
    assert_eq!(status, 404);

    let erased = http()
        .delete(format!("{base}/v1/subjects/acct-9/actions"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(erased.status(), 200);
    let erased: Value = erased.json().await.unwrap();
    assert_eq!(erased["deleted"], 1);
    let gone = http()
        .get(format!("{base}/v1/actions/{id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
}
