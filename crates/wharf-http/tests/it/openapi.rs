//! The OpenAPI document describes the API of SPEC §4: the routes the router really serves, no
//! more and no fewer, in a document that is structurally valid OpenAPI 3.1, with the error
//! shape `wharf_http::error` really answers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The document, as `/openapi.json` serves it.
async fn served_document(base: &str) -> Value {
    let response = crate::support::http()
        .get(format!("{base}/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    response.json().await.unwrap()
}

/// Every route module the binary serves (`wharf serve` composes the same list; the console's
/// HTML pages are a browser's and not part of the API document).
fn api_routers(db: &wharf_testkit::TestDb) -> Vec<axum::Router> {
    let token = wharf_http::auth::OperatorToken::new(Some("op".into()));
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new()
        .build_recorder()
        .handle();
    let inbox = Arc::new(wharf::inbox::Inbox::new(
        db.pool.clone(),
        wharf::inbox::InboxConfig::default(),
    ));
    vec![
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
    ]
}

/// `(method, path)` of every operation the document holds.
fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut operations = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if METHODS.contains(&method.as_str()) {
                operations.insert((method.clone(), path.clone()));
            }
        }
    }
    operations
}

/// A path template with every `{parameter}` replaced by a value no route refuses to match.
fn concrete(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').unwrap() + open;
        out.push_str(match &rest[open + 1..close] {
            "id" => "1",
            _ => "acme",
        });
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The path templates the router holds. axum's `Router` has no public list of its routes, but
/// its `Debug` form names every template it matches; a change of that form makes this find
/// nothing, which the caller refuses, so the test cannot pass by finding no route.
fn router_paths(router: &axum::Router) -> BTreeSet<String> {
    let text = format!("{router:?}");
    // The routes proper; the fallback router that follows holds axum's own catch-all entries.
    let text = text.split("fallback_router").next().unwrap();
    text.split('"')
        .skip(1)
        .step_by(2)
        .filter(|s| s.starts_with('/') && !s.contains("__private__axum"))
        .map(str::to_owned)
        .collect()
}

/// Every route the router serves is in the document, and every operation in the document is
/// served, method for method. The served side comes from the router, not from the document:
/// its path templates from the router itself, the methods of each from the `Allow` header of
/// the 405 it answers for a method no route serves.
#[tokio::test]
async fn the_document_holds_exactly_the_served_routes() {
    let db = wharf_testkit::TestDb::new().await;
    let routers = api_routers(&db);
    let mut paths = BTreeSet::new();
    for router in &routers {
        paths.extend(router_paths(router));
    }
    assert!(
        paths.len() >= 15 && paths.contains("/v1/actions"),
        "the router's templates could not be read: {paths:?}"
    );
    let base = crate::support::serve(wharf_http::app(routers)).await;
    let client = crate::support::http();
    let mut served = BTreeSet::new();
    for path in &paths {
        let response = client
            .request(
                reqwest::Method::from_bytes(b"TRACE").unwrap(),
                format!("{base}{}", concrete(path)),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405, "TRACE {path}");
        let allow = response.headers()["allow"].to_str().unwrap().to_owned();
        for method in allow.split(',').map(str::trim) {
            // axum answers HEAD wherever it answers GET; the document names the GET.
            if method != "HEAD" {
                served.insert((method.to_lowercase(), path.clone()));
            }
        }
    }
    let doc = served_document(&base).await;
    let documented = documented(&doc);
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty(),
        "served, not documented: {undocumented:?}"
    );
    assert!(unserved.is_empty(), "documented, not served: {unserved:?}");
    // SPEC §4 by name, so a route dropped from both sides is still noticed.
    for (method, path) in [
        ("post", "/v1/tenants/{tenant}/projects/{project}/envelopes"),
        (
            "post",
            "/v1/tenants/{tenant}/projects/{project}/envelopes:batch",
        ),
        (
            "get",
            "/v1/tenants/{tenant}/projects/{project}/dead-letters",
        ),
        ("post", "/v1/actions"),
        ("get", "/v1/actions/{id}"),
        ("post", "/v1/actions/{id}/admit"),
        ("post", "/v1/actions/{id}/refuse"),
        ("delete", "/v1/subjects/{account}/actions"),
        ("get", "/healthz"),
        ("get", "/readyz"),
        ("get", "/metrics"),
        ("get", "/openapi.json"),
    ] {
        assert!(
            documented.contains(&(method.to_owned(), path.to_owned())),
            "{method} {path} is not documented"
        );
    }
}

/// Every documented path and method is routed: the answer may be 401 (no credential) or a
/// business 4xx, but never the router's own 404/405 for an unknown route.
#[tokio::test]
async fn every_documented_route_is_served() {
    let db = wharf_testkit::TestDb::new().await;
    let base = crate::support::serve(wharf_http::app(api_routers(&db))).await;
    let doc = served_document(&base).await;
    let client = crate::support::http();
    for (method, path) in documented(&doc) {
        let method: reqwest::Method = method.to_uppercase().parse().unwrap();
        let response = client
            .request(method.clone(), format!("{base}{}", concrete(&path)))
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

/// Every `$ref` in `value`, with where it was found.
fn refs(value: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                if key == "$ref" {
                    out.push((
                        at.to_owned(),
                        v.as_str().unwrap_or("<not a string>").to_owned(),
                    ));
                } else {
                    refs(v, &format!("{at}/{key}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                refs(v, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// `value`, following one `$ref` when it is one.
fn deref<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value["$ref"].as_str() {
        Some(r) => doc.pointer(r.strip_prefix('#').unwrap()).unwrap(),
        None => value,
    }
}

/// The structural rules of OpenAPI 3.1 a client generator depends on, checked on the document
/// as served: the version and info, every `$ref` resolving inside the document, unique
/// operation ids, responses on every operation with a description each and the error shape
/// among them, security requirements and tags that are declared, and path parameters that
/// match their template exactly (each `{name}` declared `in: path`, required, and nothing
/// declared in the path that the template lacks).
#[tokio::test]
async fn the_document_is_valid_openapi() {
    let db = wharf_testkit::TestDb::new().await;
    let base = crate::support::serve(wharf_http::app(api_routers(&db))).await;
    let doc = served_document(&base).await;

    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1.")),
        "{}",
        doc["openapi"]
    );
    assert_eq!(doc["info"]["title"], "wharf");
    assert_eq!(doc["info"]["version"], "1");
    assert!(doc.get("servers").is_none(), "the document names no server");

    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    for name in [
        wharf_http::openapi::TENANT_CREDENTIAL,
        wharf_http::openapi::OPERATOR_TOKEN,
    ] {
        assert_eq!(schemes[name]["type"], "http", "{name}");
        assert_eq!(schemes[name]["scheme"], "bearer", "{name}");
    }
    let tags: BTreeSet<&str> = doc["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();

    let mut found = Vec::new();
    refs(&doc, "", &mut found);
    assert!(found.len() > 50, "too few $refs: {}", found.len());
    for (at, reference) in &found {
        let pointer = reference
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{at}: $ref {reference} leaves the document"));
        assert!(
            doc.pointer(pointer).is_some(),
            "{at}: dangling $ref {reference}"
        );
    }

    let error_ref = "#/components/schemas/Error";
    let mut operation_ids = BTreeMap::new();
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        assert!(path.starts_with('/'), "{path}");
        let template: BTreeSet<&str> = path
            .split('{')
            .skip(1)
            .map(|s| &s[..s.find('}').unwrap()])
            .collect();
        for (method, operation) in item.as_object().unwrap() {
            assert!(METHODS.contains(&method.as_str()), "{path}: {method}");
            operations += 1;
            let name = format!("{method} {path}");
            let id = operation["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{name}: no operationId"));
            if let Some(other) = operation_ids.insert(id.to_owned(), name.clone()) {
                panic!("{name} and {other} share the operationId {id}");
            }
            for tag in operation["tags"].as_array().into_iter().flatten() {
                assert!(tags.contains(tag.as_str().unwrap()), "{name}: tag {tag}");
            }
            for requirement in operation["security"].as_array().into_iter().flatten() {
                for scheme in requirement.as_object().unwrap().keys() {
                    assert!(schemes.contains_key(scheme), "{name}: scheme {scheme}");
                }
            }

            let mut declared = BTreeSet::new();
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                let parameter = deref(&doc, parameter);
                let pname = parameter["name"].as_str().unwrap();
                let location = parameter["in"].as_str().unwrap();
                assert!(
                    ["path", "query", "header", "cookie"].contains(&location),
                    "{name}: {pname} in {location}"
                );
                assert!(
                    parameter["schema"].is_object(),
                    "{name}: {pname} has no schema"
                );
                if location == "path" {
                    assert_eq!(parameter["required"], true, "{name}: {pname}");
                    assert!(declared.insert(pname.to_owned()), "{name}: {pname} twice");
                }
            }
            let declared: BTreeSet<&str> = declared.iter().map(String::as_str).collect();
            assert_eq!(declared, template, "{name}: path parameters");

            if let Some(body) = operation.get("requestBody") {
                let content = body["content"].as_object().unwrap();
                assert!(
                    !content.is_empty(),
                    "{name}: a request body without content"
                );
                for (media, c) in content {
                    // An optional body is an absent one: JSON `null` is refused like any
                    // other body that is not an object.
                    let schema = deref(&doc, &c["schema"]);
                    let nullable = schema["oneOf"]
                        .as_array()
                        .is_some_and(|o| o.iter().any(|s| s["type"] == "null"));
                    assert!(schema.is_object() && !nullable, "{name} {media}: {schema}");
                }
            }

            let responses = operation["responses"].as_object().unwrap();
            assert!(!responses.is_empty(), "{name}: no responses");
            let mut answers_error_shape = false;
            for (status, response) in responses {
                assert!(
                    status == "default"
                        || (status.len() == 3 && ("100"..="599").contains(&status.as_str())),
                    "{name}: status {status}"
                );
                let response = deref(&doc, response);
                assert!(
                    response["description"]
                        .as_str()
                        .is_some_and(|d| !d.is_empty()),
                    "{name} {status}: no description"
                );
                let schema = &response["content"]["application/json"]["schema"];
                if status.starts_with('4') || status.starts_with('5') {
                    // A refusal the inbox decided carries its outcome; every other error the
                    // one shape.
                    let decided = schema["$ref"] == "#/components/schemas/IngestResponse";
                    assert!(
                        schema["$ref"] == error_ref || decided,
                        "{name} {status}: not the error shape: {schema}"
                    );
                    answers_error_shape |= schema["$ref"] == error_ref;
                }
            }
            // `/healthz` answers while nothing else can, and answers nothing else.
            assert!(
                answers_error_shape || path == "/healthz",
                "{name}: the error shape is not among its answers"
            );
        }
    }
    assert!(operations >= 23, "{operations} operations");

    // The error schema is the shape `wharf_http::error` really answers with: an unknown route.
    let error = doc.pointer("/components/schemas/Error").unwrap();
    let answer: Value = crate::support::http()
        .get(format!("{base}/no/such/route"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let fields: BTreeSet<&str> = answer
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let properties: BTreeSet<&str> = error["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let required: BTreeSet<&str> = error["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(fields, properties, "{answer}");
    assert_eq!(fields, required, "{answer}");
    for field in fields {
        assert_eq!(error["properties"][field]["type"], "string", "{field}");
    }
}

/// The envelope's schema names exactly the fields the core decodes, at both levels, and is
/// closed like the core's decoder.
#[test]
fn the_envelope_schema_is_the_cores_envelope() {
    let doc = serde_json::to_value(wharf_http::openapi::document()).unwrap();
    let schemas = &doc["components"]["schemas"];
    let fields = |schema: &Value| -> BTreeSet<String> {
        schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let envelope = &schemas["Envelope"];
    let expected: BTreeSet<String> = wharf_core::envelope::FIELDS
        .iter()
        .map(|f| f.to_string())
        .collect();
    assert_eq!(fields(envelope), expected);
    assert_eq!(envelope["additionalProperties"], false);
    let required: BTreeSet<String> = envelope["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(required, expected);
    let integrity = deref(&doc, &envelope["properties"]["integrity"]);
    let expected: BTreeSet<String> = wharf_core::envelope::INTEGRITY_FIELDS
        .iter()
        .map(|f| f.to_string())
        .collect();
    assert_eq!(fields(integrity), expected);
    assert_eq!(integrity["additionalProperties"], false);
    // The closed sets come from the core's own lists.
    let outcomes: Vec<&str> = schemas["Outcome"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    let core: Vec<&str> = wharf_core::inbox::Outcome::ALL
        .iter()
        .map(|o| o.as_str())
        .collect();
    assert_eq!(outcomes, core);
}
