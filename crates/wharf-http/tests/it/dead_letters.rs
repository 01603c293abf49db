//! `GET …/dead-letters` over real HTTP: scope, credentials, paging, bounds.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};
use wharf::outbox::{
    ActionRequest, Adapter, Attempt, Backoff, ErrorCode, Executor, ExecutorConfig, KindSpec,
    Outcome, Registry, enqueue_many,
};
use wharf_http::auth::OperatorToken;
use wharf_testkit::TestDb;

use crate::support::{http, serve};

const TOKEN: &str = "operator-secret";

/// A provider that refuses everything for good.
struct Refuses;

#[async_trait::async_trait]
impl Adapter for Refuses {
    fn spec(&self) -> KindSpec {
        KindSpec {
            name: "refuses",
            at_most_once: false,
            instance_level: false,
            max_attempts_default: 3,
            backoff: Backoff::default(),
            call_timeout_ms: 1_000,
        }
    }

    async fn execute(&self, _attempt: &mut Attempt) -> Outcome {
        Outcome::Failed {
            code: ErrorCode::new("http_4xx_410").unwrap(),
        }
    }
}

async fn fail_actions(
    db: &TestDb,
    registry: &Arc<Registry>,
    tenant: &str,
    project: &str,
    n: usize,
) {
    let requests = (0..n)
        .map(|i| {
            let mut r = ActionRequest::new(
                "refuses",
                format!("{tenant}-{project}-{i}"),
                format!("{tenant}-{project}-{i}"),
                json!({"secret_payload": "never shown"}),
            )
            .tenant(tenant);
            r.project_id = Some(project.to_owned());
            r
        })
        .collect();
    let mut conn = db.pool.acquire().await.unwrap();
    enqueue_many(&mut conn, registry, requests).await.unwrap();
    drop(conn);
    let executor =
        Executor::new(db.pool.clone(), registry.clone(), ExecutorConfig::default()).unwrap();
    executor.drain().await.unwrap();
}

async fn get(base: &str, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = http().get(format!("{base}{path}"));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let response = req.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn dead_letters_page_within_one_tenant_and_project_only() {
    let db = TestDb::new().await;
    let mut registry = Registry::new();
    registry.register(Arc::new(Refuses)).unwrap();
    let registry = Arc::new(registry);
    for tenant in ["acme", "globex"] {
        wharf::inbox::create_tenant(&db.pool, tenant).await.unwrap();
    }
    let acme = wharf::inbox::issue_credential(&db.pool, "acme", "ops", None)
        .await
        .unwrap()
        .token;
    let globex = wharf::inbox::issue_credential(&db.pool, "globex", "ops", None)
        .await
        .unwrap()
        .token;
    fail_actions(&db, &registry, "acme", "p1", 150).await;
    fail_actions(&db, &registry, "acme", "p2", 3).await;
    fail_actions(&db, &registry, "globex", "p1", 5).await;
    let base = serve(wharf_http::app([wharf_http::dead_letters::routes(
        db.pool.clone(),
        OperatorToken::new(Some(TOKEN.into())),
    )]))
    .await;
    let path = "/v1/tenants/acme/projects/p1/dead-letters";

    let (status, first) = get(&base, path, Some(&acme)).await;
    assert_eq!(status, 200, "{first}");
    let items = first["items"].as_array().unwrap();
    assert_eq!(items.len(), 100);
    assert_eq!(items[0]["stop_reason"], "PROVIDER_REFUSED");
    assert_eq!(items[0]["error_code"], "http_4xx_410");
    assert!(
        !first.to_string().contains("never shown"),
        "a payload leaked"
    );
    let cursor = first["next_cursor"].as_str().unwrap();
    let (status, second) = get(&base, &format!("{path}?after={cursor}"), Some(&acme)).await;
    assert_eq!(status, 200);
    assert_eq!(second["items"].as_array().unwrap().len(), 50);
    let mut seen = HashSet::new();
    for item in items.iter().chain(second["items"].as_array().unwrap()) {
        assert!(
            seen.insert(item["id"].as_i64().unwrap()),
            "a row appeared twice"
        );
        assert!(
            item["idempotency_key"]
                .as_str()
                .unwrap()
                .starts_with("acme-p1-")
        );
    }
    assert_eq!(seen.len(), 150);
    if let Some(next) = second["next_cursor"].as_str() {
        let (_, third) = get(&base, &format!("{path}?after={next}"), Some(&acme)).await;
        assert_eq!(third["items"].as_array().unwrap().len(), 0);
    }

    // The operator reads any tenant; a credential of another tenant reads nothing.
    let (status, page) = get(
        &base,
        "/v1/tenants/globex/projects/p1/dead-letters",
        Some(TOKEN),
    )
    .await;
    assert_eq!(
        (status, page["items"].as_array().map(Vec::len)),
        (200, Some(5))
    );
    let (status, body) = get(&base, path, Some(&globex)).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));
    let (status, _) = get(&base, path, None).await;
    assert_eq!(status, 401);
    let (status, _) = get(&base, path, Some("wharf_not-a-real-token")).await;
    assert_eq!(status, 401);

    // Bounds.
    for (query, expected) in [
        ("limit=1", 200),
        ("limit=100", 200),
        ("limit=101", 400),
        ("limit=0", 400),
        ("after=bogus", 400),
        ("colour=red", 400),
    ] {
        let (status, body) = get(&base, &format!("{path}?{query}"), Some(&acme)).await;
        assert_eq!(status, expected, "{query}: {body}");
    }
    let (_, one) = get(&base, &format!("{path}?limit=1"), Some(&acme)).await;
    assert_eq!(one["items"].as_array().unwrap().len(), 1);
}
