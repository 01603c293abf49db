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
        ("/v1/subjects/{account}/actions", "delete"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
        ("/openapi.json", "get"),
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
