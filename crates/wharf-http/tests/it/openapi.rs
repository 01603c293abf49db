//! The OpenAPI document describes the API of SPEC §4.

#[test]
fn the_document_lists_every_route_of_the_spec() {
    let doc: serde_json::Value = serde_json::from_str(wharf_http::openapi::DOCUMENT).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/tenants/{tenant}/projects/{project}/envelopes", "post"),
        (
            "/v1/tenants/{tenant}/projects/{project}/envelopes:batch",
            "post",
        ),
        (
            "/v1/tenants/{tenant}/projects/{project}/dead-letters",
            "get",
        ),
        ("/v1/actions", "post"),
        ("/v1/actions/{id}", "get"),
        ("/v1/actions/{id}/admit", "post"),
        ("/v1/actions/{id}/refuse", "post"),
        ("/v1/actions", "get"),
        ("/v1/actions/{id}/cancel", "post"),
        ("/v1/actions/{id}/resolve", "post"),
        ("/v1/actions/{id}/resolutions", "get"),
        ("/v1/audit", "get"),
        ("/v1/kinds/{kind}/pause", "post"),
        ("/v1/kinds/{kind}/resume", "post"),
        ("/v1/pauses", "get"),
        (
            "/v1/tenants/{tenant}/projects/{project}/dead-letters/redrive",
            "post",
        ),
        ("/v1/subjects/{account}/actions", "delete"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
        ("/openapi.json", "get"),
        ("/v1/webhook-keys", "get"),
        ("/v1/tenants/{tenant}/signing-keys", "get"),
    ] {
        assert!(
            paths[path][method].is_object(),
            "{method} {path} is not documented"
        );
    }
    // Every $ref points at something that exists.
    let text = wharf_http::openapi::DOCUMENT;
    for reference in text.split("\"$ref\": \"#/").skip(1) {
        let pointer = &reference[..reference.find('"').unwrap()];
        assert!(
            doc.pointer(&format!("/{pointer}")).is_some(),
            "dangling $ref {pointer}"
        );
    }
}

/// Every documented path and method is routed: the answer may be 401 (no credential) or a
/// business 4xx, but never the router's own 404/405 for an unknown route.
#[tokio::test]
async fn every_documented_route_is_served() {
    use std::sync::Arc;

    let db = wharf_testkit::TestDb::new().await;
    let token = wharf_http::auth::OperatorToken::new(Some("op".into()));
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new()
        .build_recorder()
        .handle();
    let inbox = Arc::new(wharf::inbox::Inbox::new(
        db.pool.clone(),
        wharf::inbox::InboxConfig::default(),
    ));
    let app = wharf_http::app([
        wharf_http::health::routes(db.pool.clone(), Some(prometheus)),
        wharf_http::openapi::routes(),
        wharf_http::actions::routes(
            db.pool.clone(),
            Arc::new(wharf::outbox::Registry::new()),
            token.clone(),
        ),
        wharf_http::dead_letters::routes(db.pool.clone(), token.clone()),
        wharf_http::signing_keys::routes(db.pool.clone(), token.clone()),
        wharf_http::ingest::routes(inbox),
        wharf_http::webhook_keys::routes(Vec::new(), token),
    ]);
    let base = crate::support::serve(app).await;
    let doc: serde_json::Value = serde_json::from_str(wharf_http::openapi::DOCUMENT).unwrap();
    let client = crate::support::http();
    for (path, methods) in doc["paths"].as_object().unwrap() {
        let concrete = path
            .replace("{tenant}", "acme")
            .replace("{project}", "p1")
            .replace("{id}", "1")
            .replace("{account}", "someone");
        for method in methods.as_object().unwrap().keys() {
            let method: reqwest::Method = method.to_uppercase().parse().unwrap();
            let response = client
                .request(method.clone(), format!("{base}{concrete}"))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            let unrouted = status == 405 || (status == 404 && !body.contains("correlation_id"));
            assert!(
                !unrouted,
                "{method} {path} is documented but not served ({status})"
            );
        }
    }
}
