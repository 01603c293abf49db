//! Operator actions over real HTTP: list, cancel, resolve (with resend), resolutions, audit.
//! Each checks the answer, the state it left, the audit, and that refusals change nothing.

use std::sync::Arc;

use serde_json::{Value, json};
use wharf::outbox::Registry;
use wharf_http::auth::OperatorToken;
use wharf_testkit::TestDb;

use crate::support::{Noop, census, http, serve};

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

async fn call(
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
) -> (u16, Value) {
    let mut req = http()
        .request(method, format!("{base}{path}"))
        .header("x-correlation-id", "corr-http-1");
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

async fn post(base: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    call(base, reqwest::Method::POST, path, body, Some(TOKEN)).await
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    call(base, reqwest::Method::GET, path, None, Some(TOKEN)).await
}

async fn enqueue(base: &str, key: &str) -> i64 {
    let (status, body) = post(
        base,
        "/v1/actions",
        Some(
            json!({"kind": "noop", "tenant_id": "t1", "lane_key": format!("lane-{key}"),
                    "idempotency_key": key, "payload": {"n": key}}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_i64().unwrap()
}

/// Makes an action UNCERTAIN the way an executor would: claimed, then ended in doubt (an
/// ending moves the row from wharf.action_live to wharf.action_ended).
async fn make_uncertain(pool: &sqlx::PgPool, id: i64) {
    sqlx::query(
        "UPDATE wharf.action_live SET state = 'EXECUTING', epoch = epoch + 1,
                lease_expires_at = now() + interval '1 minute' WHERE id = $1",
    )
    .bind(id)
    .execute(pool)
    .await
    .unwrap();
    crate::support::end_by_hand(pool, id, "UNCERTAIN", "UNCERTAIN_PROVIDER", Some("timeout")).await;
}

/// Row counts of every table and the text of every action row.
async fn snapshot(pool: &sqlx::PgPool) -> (std::collections::BTreeMap<String, i64>, String) {
    let actions: Option<String> =
        sqlx::query_scalar("SELECT string_agg(a::text, E'\\n' ORDER BY id) FROM wharf.action a")
            .fetch_one(pool)
            .await
            .unwrap();
    (census(pool).await, actions.unwrap_or_default())
}

#[tokio::test]
async fn cancel_over_http_ends_the_action_and_audits_it_with_the_correlation_id() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let id = enqueue(&base, "k1").await;
    let (status, body) = post(
        &base,
        &format!("/v1/actions/{id}/cancel"),
        Some(json!({"actor": "alice"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["from"], "ADMITTED");
    assert_eq!(body["action"]["state"], "CANCELLED");
    assert_eq!(body["action"]["stop_reason"], "OPERATOR");
    assert!(body["action"].get("payload").is_none());

    let (status, audit) = get(&base, &format!("/v1/audit?action_id={id}")).await;
    assert_eq!(status, 200);
    let items = audit["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(
        (
            &items[0]["operation"],
            &items[0]["actor"],
            &items[0]["correlation_id"],
            &items[0]["audit_id"]
        ),
        (
            &json!("cancel"),
            &json!("alice"),
            &json!("corr-http-1"),
            &body["audit_id"]
        )
    );
    assert_eq!(audit["next_after"], Value::Null);

    // An empty body cancels with the default actor.
    let other = enqueue(&base, "k2").await;
    let (status, _) = post(&base, &format!("/v1/actions/{other}/cancel"), None).await;
    assert_eq!(status, 200);
    let (_, audit) = get(&base, &format!("/v1/audit?action_id={other}")).await;
    assert_eq!(
        audit["items"][0]["actor"],
        wharf_http::operator::DEFAULT_ACTOR
    );
}

/// A request and the refusal it must get: method, path, body, token, status, code.
type Case = (
    reqwest::Method,
    String,
    Option<Value>,
    Option<&'static str>,
    u16,
    &'static str,
);

#[tokio::test]
async fn refused_operator_requests_answer_in_the_one_shape_and_change_nothing() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let live = enqueue(&base, "live").await;
    let doubt = enqueue(&base, "doubt").await;
    make_uncertain(&db.pool, doubt).await;
    let before = snapshot(&db.pool).await;
    let cases: Vec<Case> = vec![
        (
            reqwest::Method::POST,
            format!("/v1/actions/{live}/cancel"),
            None,
            None,
            401,
            "unauthorized",
        ),
        (
            reqwest::Method::POST,
            format!("/v1/actions/{live}/cancel"),
            None,
            Some("wrong"),
            401,
            "unauthorized",
        ),
        (
            reqwest::Method::GET,
            "/v1/audit".into(),
            None,
            None,
            401,
            "unauthorized",
        ),
        (
            reqwest::Method::GET,
            "/v1/actions".into(),
            None,
            None,
            401,
            "unauthorized",
        ),
        (
            reqwest::Method::POST,
            "/v1/actions/999999/cancel".into(),
            None,
            Some(TOKEN),
            404,
            "not-found",
        ),
        (
            reqwest::Method::POST,
            format!("/v1/actions/{doubt}/cancel"),
            None,
            Some(TOKEN),
            409,
            "not-cancellable",
        ),
        (
            reqwest::Method::POST,
            format!("/v1/actions/{live}/cancel"),
            Some(json!({"actor": ""})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            reqwest::Method::POST,
            format!("/v1/actions/{live}/cancel"),
            Some(json!({"who": "x"})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            reqwest::Method::POST,
            "/v1/actions/abc/cancel".into(),
            None,
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            reqwest::Method::POST,
            format!("/v1/actions/{live}/resolve"),
            Some(json!({"finding": "delivered"})),
            Some(TOKEN),
            409,
            "not-in-doubt",
        ),
        (
            reqwest::Method::POST,
            "/v1/actions/999999/resolve".into(),
            Some(json!({"finding": "delivered"})),
            Some(TOKEN),
            404,
            "not-found",
        ),
        (
            reqwest::Method::POST,
            format!("/v1/actions/{doubt}/resolve"),
            Some(json!({"finding": "maybe"})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            reqwest::Method::POST,
            format!("/v1/actions/{doubt}/resolve"),
            Some(json!({"finding": "delivered", "note": "x".repeat(513)})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            reqwest::Method::POST,
            format!("/v1/actions/{doubt}/resolve"),
            Some(json!({"finding": "delivered", "resend_payload": {"n": 1}})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            reqwest::Method::POST,
            format!("/v1/actions/{doubt}/resolve"),
            Some(json!({})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            reqwest::Method::GET,
            "/v1/audit?limit=101".into(),
            None,
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            reqwest::Method::GET,
            "/v1/audit?limit=0".into(),
            None,
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            reqwest::Method::GET,
            "/v1/actions?limit=101".into(),
            None,
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            reqwest::Method::GET,
            "/v1/actions?state=RUNNING".into(),
            None,
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            reqwest::Method::GET,
            "/v1/actions?color=red".into(),
            None,
            Some(TOKEN),
            400,
            "invalid-request",
        ),
    ];
    for (method, path, body, token, status, code) in cases {
        let (got, answer) = call(&base, method.clone(), &path, body, token).await;
        assert_eq!(
            (got, answer["code"].as_str()),
            (status, Some(code)),
            "{method} {path}: {answer}"
        );
        assert_eq!(answer["correlation_id"], "corr-http-1", "{path}");
        assert!(answer["reason"].is_string());
    }
    assert_eq!(snapshot(&db.pool).await, before);
}

#[tokio::test]
async fn resolve_over_http_records_the_finding_and_resends_once() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let doubt = enqueue(&base, "doubt").await;
    make_uncertain(&db.pool, doubt).await;
    let (_, original) = get(&base, &format!("/v1/actions/{doubt}")).await;
    let ask = json!({"finding": "not-delivered", "note": "no trace at the provider",
                     "resend_payload": {"n": "again"}, "actor": "bob"});
    let (status, body) = post(
        &base,
        &format!("/v1/actions/{doubt}/resolve"),
        Some(ask.clone()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["resolution"]["finding"], "not-delivered");
    assert_eq!(body["resolution"]["actor"], "bob");
    assert_eq!(body["resent_created"], true);
    let resent = body["resent"]["id"].as_i64().unwrap();
    assert_eq!(body["resolution"]["resent_action_id"], resent);
    assert_eq!(body["resent"]["state"], "ADMITTED");
    assert_eq!(body["resent"]["lane_key"], "lane-doubt");
    assert_eq!(body["resent"]["payload"], json!({"n": "again"}));
    assert_eq!(
        body["resent"]["idempotency_key"],
        wharf::outbox::resend_key(doubt)
    );
    // Again: the same resend, a second resolution.
    let (status, again) = post(&base, &format!("/v1/actions/{doubt}/resolve"), Some(ask)).await;
    assert_eq!(status, 200);
    assert_eq!(
        (again["resent"]["id"].as_i64(), &again["resent_created"]),
        (Some(resent), &json!(false))
    );
    // The original never changed.
    assert_eq!(
        get(&base, &format!("/v1/actions/{doubt}")).await.1,
        original
    );
    let (_, list) = get(&base, &format!("/v1/actions/{doubt}/resolutions")).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let (_, audit) = get(&base, "/v1/audit").await;
    let ops: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["operation"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["resolve", "resolve"]);
}

#[tokio::test]
async fn the_action_list_pages_by_keyset_with_filters() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(enqueue(&base, &format!("k{i}")).await);
    }
    post(&base, &format!("/v1/actions/{}/cancel", ids[1]), None).await;
    let (status, first) = get(&base, "/v1/actions?limit=2").await;
    assert_eq!(status, 200);
    let page_ids = |v: &Value| -> Vec<i64> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(page_ids(&first), ids[..2]);
    assert_eq!(first["next_after"], ids[1]);
    let (_, rest) = get(&base, &format!("/v1/actions?after={}", ids[1])).await;
    assert_eq!(page_ids(&rest), ids[2..]);
    assert_eq!(rest["next_after"], Value::Null);
    let (_, cancelled) = get(&base, "/v1/actions?state=CANCELLED&tenant=t1&kind=noop").await;
    assert_eq!(page_ids(&cancelled), [ids[1]]);
    let (_, none) = get(&base, "/v1/actions?tenant=other").await;
    assert_eq!(page_ids(&none), Vec::<i64>::new());
}

#[tokio::test]
async fn pause_and_resume_over_http_are_audited_and_listed() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let (status, body) = post(
        &base,
        "/v1/kinds/noop/pause",
        Some(json!({"tenant": "t1", "note": "provider outage", "actor": "alice"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["created"], true);
    assert_eq!(body["pause"]["kind"], "noop");
    assert_eq!(body["pause"]["tenant_id"], "t1");
    assert_eq!(body["pause"]["note"], "provider outage");
    let audit_id = body["audit_id"].clone();

    // Again: the same pause, 200, nothing written.
    let before = snapshot(&db.pool).await;
    let (status, again) = post(&base, "/v1/kinds/noop/pause", Some(json!({"tenant": "t1"}))).await;
    assert_eq!((status, &again["created"]), (200, &json!(false)), "{again}");
    assert_eq!(again["audit_id"], Value::Null);
    assert_eq!(snapshot(&db.pool).await, before);

    // A kind-wide pause with an empty body.
    let (status, _) = post(&base, "/v1/kinds/noop/pause", None).await;
    assert_eq!(status, 201);
    let (status, listed) = get(&base, "/v1/pauses").await;
    assert_eq!(status, 200);
    let tenants: Vec<&Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["tenant_id"])
        .collect();
    assert_eq!(tenants, [&Value::Null, &json!("t1")]);

    let (status, resumed) = post(
        &base,
        "/v1/kinds/noop/resume",
        Some(json!({"tenant": "t1"})),
    )
    .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["resumed"], true);
    assert_eq!(resumed["ended"]["note"], "provider outage");
    let (status, none) = post(
        &base,
        "/v1/kinds/noop/resume",
        Some(json!({"tenant": "t1"})),
    )
    .await;
    assert_eq!((status, &none["resumed"]), (200, &json!(false)));

    let (_, audit) = get(&base, "/v1/audit").await;
    let ops: Vec<(&Value, &Value)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (&e["operation"], &e["action_id"]))
        .collect();
    assert_eq!(
        ops,
        [
            (&json!("pause"), &Value::Null),
            (&json!("pause"), &Value::Null),
            (&json!("resume"), &Value::Null)
        ]
    );
    assert_eq!(audit["items"][0]["audit_id"], audit_id);
    assert_eq!(audit["items"][0]["actor"], "alice");
    assert_eq!(audit["items"][0]["correlation_id"], "corr-http-1");
}

#[tokio::test]
async fn refused_pauses_and_redrives_change_nothing() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let before = snapshot(&db.pool).await;
    let long_note = "n".repeat(wharf::outbox::NOTE_BYTES_MAX + 1);
    let redrive = "/v1/tenants/acme/projects/p1/dead-letters/redrive";
    // Path, body, token, status, code (all POST).
    type Refusal<'a> = (&'a str, Option<Value>, Option<&'a str>, u16, &'a str);
    let cases: Vec<Refusal> = vec![
        ("/v1/kinds/noop/pause", None, None, 401, "unauthorized"),
        (
            "/v1/kinds/noop/pause",
            None,
            Some("wrong"),
            401,
            "unauthorized",
        ),
        (
            "/v1/kinds/nope/pause",
            None,
            Some(TOKEN),
            400,
            "unknown-kind",
        ),
        (
            "/v1/kinds/noop/pause",
            Some(json!({"tenant": ""})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            "/v1/kinds/noop/pause",
            Some(json!({"note": long_note})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            "/v1/kinds/noop/pause",
            Some(json!({"tenants": "t1"})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            "/v1/kinds/noop/resume",
            Some(json!({"note": "x"})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (redrive, None, None, 401, "unauthorized"),
        (
            redrive,
            Some(json!({"limit": 0})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            redrive,
            Some(json!({"limit": 101})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            redrive,
            Some(json!({"dry_run": "yes"})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
        (
            "/v1/tenants/acme/projects/p1/dead-letters/redrive",
            Some(json!({"error_code": "NOT A CODE"})),
            Some(TOKEN),
            400,
            "invalid-request",
        ),
    ];
    for (path, body, token, status, code) in cases {
        let (got, answer) = call(&base, reqwest::Method::POST, path, body.clone(), token).await;
        assert_eq!(
            (got, answer["code"].as_str()),
            (status, Some(code)),
            "{path} {body:?}: {answer}"
        );
        assert_eq!(answer["correlation_id"], "corr-http-1", "{answer}");
    }
    let (status, _) = call(&base, reqwest::Method::GET, "/v1/pauses", None, None).await;
    assert_eq!(status, 401);
    assert_eq!(snapshot(&db.pool).await, before);

    // A dry run over an empty scope finds nothing and writes nothing; so does an applied one.
    for dry_run in [true, false] {
        let (status, body) = post(&base, redrive, Some(json!({"dry_run": dry_run}))).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body,
            json!({"dry_run": dry_run, "items": [], "more": false})
        );
    }
    assert_eq!(snapshot(&db.pool).await, before);
}
