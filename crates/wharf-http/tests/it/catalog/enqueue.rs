//! The admin API's enqueue rows (`POST /v1/actions`): the operator token, the body limit,
//! requests that are not a valid action, an unknown kind, the adapter's refusal and a taken
//! key. The admin API keeps no audit.

use serde_json::{Value, json};

use super::Expect::*;
use super::{Fixture, OPERATOR, Row, admin_request, post};

pub(super) fn rows(rows: &mut Vec<Row>, fx: &Fixture) {
    let token = || Some(fx.token.clone());
    let too_large = Error("payload-too-large", "body-too-large");
    let admin = |r: Value| serde_json::to_vec(&r).unwrap();
    let with = |change: &dyn Fn(&mut Value)| {
        let mut r = admin_request("fresh-key");
        change(&mut r);
        admin(r)
    };
    let op = || Some(OPERATOR.to_owned());
    let unauthorized = Error("unauthorized", "operator token");
    let invalid = |fragment| Error("invalid-request", fragment);
    post(
        rows,
        "enqueue, no token",
        "/v1/actions",
        None,
        admin(admin_request("k")),
        401,
        unauthorized.clone(),
    );
    post(
        rows,
        "enqueue, wrong token",
        "/v1/actions",
        Some("nope".into()),
        admin(admin_request("k")),
        401,
        unauthorized.clone(),
    );
    post(
        rows,
        "enqueue, a producer's credential",
        "/v1/actions",
        token(),
        admin(admin_request("k")),
        401,
        unauthorized.clone(),
    );
    post(
        rows,
        "enqueue, body over the limit",
        "/v1/actions",
        op(),
        vec![b' '; wharf_http::actions::ENQUEUE_BODY_BYTES_MAX + 1],
        413,
        too_large.clone(),
    );
    for (name, body, fragment) in [
        (
            "enqueue, empty body",
            b"".to_vec(),
            "invalid enqueue request",
        ),
        (
            "enqueue, not JSON",
            b"{kind".to_vec(),
            "invalid enqueue request",
        ),
        (
            "enqueue, an array",
            b"[]".to_vec(),
            "invalid enqueue request",
        ),
        (
            "enqueue, an unknown field",
            with(&|r| r["colour"] = "red".into()),
            "colour",
        ),
        (
            "enqueue, no kind",
            with(&|r| {
                r.as_object_mut().unwrap().remove("kind");
            }),
            "kind",
        ),
        (
            "enqueue, no lane",
            with(&|r| {
                r.as_object_mut().unwrap().remove("lane_key");
            }),
            "lane_key",
        ),
        (
            "enqueue, no key",
            with(&|r| {
                r.as_object_mut().unwrap().remove("idempotency_key");
            }),
            "idempotency_key",
        ),
        (
            "enqueue, no payload",
            with(&|r| {
                r.as_object_mut().unwrap().remove("payload");
            }),
            "payload",
        ),
        (
            "enqueue, kind a number",
            with(&|r| r["kind"] = 7.into()),
            "invalid enqueue request",
        ),
        (
            "enqueue, max_attempts negative",
            with(&|r| r["max_attempts"] = (-1).into()),
            "invalid enqueue request",
        ),
        (
            "enqueue, max_attempts a string",
            with(&|r| r["max_attempts"] = "3".into()),
            "invalid enqueue request",
        ),
        (
            "enqueue, max_attempts past u32",
            with(&|r| r["max_attempts"] = 4_294_967_296u64.into()),
            "invalid enqueue request",
        ),
        (
            "enqueue, run_at not a date",
            with(&|r| r["run_at"] = "soon".into()),
            "invalid enqueue request",
        ),
        (
            "enqueue, expires_at not a date",
            with(&|r| r["expires_at"] = 5.into()),
            "invalid enqueue request",
        ),
        (
            "enqueue, proposed a string",
            with(&|r| r["proposed"] = "yes".into()),
            "invalid enqueue request",
        ),
        (
            "enqueue, tenant missing",
            with(&|r| r["tenant_id"] = Value::Null),
            "tenant_id",
        ),
        (
            "enqueue, tenant empty",
            with(&|r| r["tenant_id"] = "".into()),
            "tenant_id",
        ),
        (
            "enqueue, tenant too long",
            with(&|r| r["tenant_id"] = "t".repeat(257).into()),
            "tenant_id",
        ),
        (
            "enqueue, project empty",
            with(&|r| r["project_id"] = "".into()),
            "project_id",
        ),
        (
            "enqueue, subject too long",
            with(&|r| r["subject_account_id"] = "s".repeat(257).into()),
            "subject_account_id",
        ),
        (
            "enqueue, lane empty",
            with(&|r| r["lane_key"] = "".into()),
            "lane_key",
        ),
        (
            "enqueue, lane too long",
            with(&|r| r["lane_key"] = "l".repeat(257).into()),
            "lane_key",
        ),
        (
            "enqueue, key empty",
            with(&|r| r["idempotency_key"] = "".into()),
            "idempotency_key",
        ),
        (
            "enqueue, key too long",
            with(&|r| r["idempotency_key"] = "k".repeat(257).into()),
            "idempotency_key",
        ),
        (
            "enqueue, NUL in the key",
            with(&|r| r["idempotency_key"] = "k\u{0}x".into()),
            "idempotency_key: must not contain U+0000",
        ),
        (
            "enqueue, NUL in the lane",
            with(&|r| r["lane_key"] = "\u{0}".into()),
            "lane_key: must not contain U+0000",
        ),
        (
            "enqueue, NUL in the tenant",
            with(&|r| r["tenant_id"] = "t\u{0}".into()),
            "tenant_id: must not contain U+0000",
        ),
        (
            "enqueue, NUL in the project",
            with(&|r| r["project_id"] = "p\u{0}".into()),
            "project_id: must not contain U+0000",
        ),
        (
            "enqueue, NUL in the subject",
            with(&|r| r["subject_account_id"] = "\u{0}a".into()),
            "subject_account_id: must not contain U+0000",
        ),
        (
            "enqueue, NUL in a payload string",
            with(&|r| r["payload"] = json!({"to": ["a", "b\u{0}"]})),
            "payload: must not contain U+0000 (NUL), which PostgreSQL cannot store; found in the string at /to/1",
        ),
        (
            "enqueue, NUL in a payload key",
            with(&|r| r["payload"] = json!({"a\u{0}": 1})),
            "found in the key at /a\\u0000",
        ),
        (
            "enqueue, payload too deep",
            with(&|r| {
                let mut v = json!(1);
                for _ in 0..40 {
                    v = json!([v]);
                }
                r["payload"] = v;
            }),
            "payload: must nest at most",
        ),
        (
            "enqueue, payload over the limit",
            with(&|r| {
                r["payload"] = json!({"x": "x".repeat(wharf::outbox::PAYLOAD_BYTES_MAX_DEFAULT)})
            }),
            "payload: must be at most",
        ),
        (
            "enqueue, max_attempts 0",
            with(&|r| r["max_attempts"] = 0.into()),
            "max_attempts",
        ),
        (
            "enqueue, max_attempts too many",
            with(&|r| r["max_attempts"] = (wharf::outbox::ATTEMPTS_MAX + 1).into()),
            "max_attempts",
        ),
        (
            "enqueue, expires before it may run",
            with(&|r| {
                r["run_at"] = "2030-01-02T00:00:00Z".into();
                r["expires_at"] = "2030-01-01T00:00:00Z".into();
            }),
            "expires_at",
        ),
    ] {
        post(
            rows,
            name,
            "/v1/actions",
            op(),
            body,
            400,
            invalid(fragment),
        );
    }
    post(
        rows,
        "enqueue, unknown kind",
        "/v1/actions",
        op(),
        with(&|r| r["kind"] = "fax".into()),
        400,
        Error("unknown-kind", "fax"),
    );
    post(
        rows,
        "enqueue, NUL in the kind",
        "/v1/actions",
        op(),
        with(&|r| r["kind"] = "no\u{0}op".into()),
        400,
        Error("unknown-kind", "no"),
    );
    post(
        rows,
        "enqueue, refused by the adapter",
        "/v1/actions",
        op(),
        with(&|r| r["payload"] = json!({"refuse": true})),
        400,
        Error("payload-refused", "asked to refuse"),
    );
    post(
        rows,
        "enqueue, key taken with other content",
        "/v1/actions",
        op(),
        admin(
            json!({"kind": "noop", "tenant_id": "t1", "lane_key": "lane-1", "idempotency_key": "taken", "payload": {"n": 2}}),
        ),
        409,
        Error("idempotency-conflict", "different content"),
    );
}
