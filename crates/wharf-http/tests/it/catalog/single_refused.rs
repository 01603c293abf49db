//! The single-envelope ingest rows refused after authentication, one audit row each: bodies
//! that are not an envelope, route and identity faults, signature faults, signed envelopes the
//! inbox cannot take (schema, event type, payload), and conflicts with the stream's state.

use serde_json::json;

use super::Expect::*;
use super::{Fixture, Row, SINGLE, post_into};

pub(super) fn rows(rows: &mut Vec<Row>, fx: &Fixture, good: &[u8]) {
    let token = || Some(fx.token.clone());
    let mut ingest = post_into(rows);

    let payload = Decided("refuse-tampered", "payload");
    let route = Decided("refuse-tampered", "route");
    let signature = Decided("refuse-tampered", "signature");
    for (name, body) in [
        ("empty body", b"".to_vec()),
        ("malformed JSON", b"{\"schema_version\": 1,".to_vec()),
        ("a JSON array", b"[1,2]".to_vec()),
        ("JSON null", b"null".to_vec()),
        ("a JSON string", b"\"envelope\"".to_vec()),
        ("invalid UTF-8", b"{\"a\":\"\xff\"}".to_vec()),
        (
            "a byte-order mark",
            [b"\xef\xbb\xbf".as_slice(), good].concat(),
        ),
        ("bytes after the envelope", [good, b" {}"].concat()),
        (
            "an unknown field",
            fx.edited(|v| v["colour"] = "red".into()),
        ),
        (
            "an unknown integrity field",
            fx.edited(|v| v["integrity"]["x"] = 1.into()),
        ),
        (
            "a missing field",
            fx.edited(|v| {
                v.as_object_mut().unwrap().remove("producer_version");
            }),
        ),
    ] {
        ingest(name, SINGLE, token(), body, 422, payload.clone(), 1);
    }
    // The integrity member is the signature's (wharf_core::inbox::refusal_for_envelope_error).
    ingest(
        "a missing integrity",
        SINGLE,
        token(),
        fx.edited(|v| {
            v.as_object_mut().unwrap().remove("integrity");
        }),
        422,
        signature.clone(),
        1,
    );
    for (name, body) in [
        (
            "schema_version as a string",
            fx.edited(|v| v["schema_version"] = "1".into()),
        ),
        (
            "payload not an object",
            fx.edited(|v| v["payload"] = json!([1])),
        ),
        (
            "a float in the payload",
            fx.text("\"version\":1", "\"version\":1.5"),
        ),
        (
            "an exponent in the payload",
            fx.text("\"version\":1", "\"version\":1e0"),
        ),
        (
            "a duplicate key",
            fx.text("\"version\":1", "\"version\":1,\"version\":1"),
        ),
        ("a lone surrogate", fx.text("\"laptop-1\"", "\"\\ud800\"")),
        (
            "an integer past u64",
            fx.text("\"version\":1", "\"version\":18446744073709551616"),
        ),
        (
            "nesting past the depth limit",
            fx.text(
                "\"version\":1",
                &format!("\"version\":{}1{}", "[".repeat(70), "]".repeat(70)),
            ),
        ),
        (
            "occurred_at not a timestamp",
            fx.edited(|v| v["occurred_at"] = "yesterday".into()),
        ),
        (
            "producer_version empty",
            fx.edited(|v| v["producer_version"] = "".into()),
        ),
        (
            "producer_version too long",
            fx.edited(|v| v["producer_version"] = "v".repeat(65).into()),
        ),
        (
            "event_type not a name",
            fx.edited(|v| v["event_type"] = "Sync-Cursor".into()),
        ),
    ] {
        ingest(name, SINGLE, token(), body, 422, payload.clone(), 1);
    }

    ingest(
        "URL tenant not the credential's",
        "/v1/tenants/globex/projects/web/envelopes",
        token(),
        good.to_vec(),
        422,
        route.clone(),
        1,
    );
    // A refusal answers the cursor of the stream its URL names: another project's is 0.
    let other_stream = DecidedAt("refuse-tampered", "route", 0);
    for (name, path) in [
        (
            "URL project not the envelope's",
            "/v1/tenants/acme/projects/other/envelopes",
        ),
        (
            "URL project not an identity",
            "/v1/tenants/acme/projects/a%20b/envelopes",
        ),
        (
            "URL project with a NUL",
            "/v1/tenants/acme/projects/w%00eb/envelopes",
        ),
    ] {
        ingest(
            name,
            path,
            token(),
            good.to_vec(),
            422,
            other_stream.clone(),
            1,
        );
    }
    for (name, body) in [
        (
            "envelope tenant not the URL's (signed)",
            fx.signed(|e| e.tenant_id = "globex".into()),
        ),
        (
            "envelope project not the URL's (signed)",
            fx.signed(|e| e.project_id = "other".into()),
        ),
        (
            "tenant_id not an identity",
            fx.edited(|v| v["tenant_id"] = "ac me".into()),
        ),
        (
            "project_id with a NUL",
            fx.edited(|v| v["project_id"] = "w\u{0}b".into()),
        ),
        (
            "event_id not a ULID",
            fx.edited(|v| v["event_id"] = "not-a-ulid".into()),
        ),
        (
            "event_id lowercase",
            fx.edited(|v| {
                let id = v["event_id"].as_str().unwrap().to_lowercase();
                v["event_id"] = id.into();
            }),
        ),
        (
            "idempotency_key empty",
            fx.edited(|v| v["idempotency_key"] = "".into()),
        ),
        (
            "idempotency_key too long",
            fx.edited(|v| v["idempotency_key"] = "k".repeat(257).into()),
        ),
        (
            "idempotency_key with a NUL",
            fx.edited(|v| v["idempotency_key"] = "k\u{0}x".into()),
        ),
        (
            "producer_sequence 0",
            fx.edited(|v| v["producer_sequence"] = 0.into()),
        ),
        (
            "producer_sequence negative",
            fx.edited(|v| v["producer_sequence"] = (-1).into()),
        ),
        (
            "producer_sequence a string",
            fx.edited(|v| v["producer_sequence"] = "3".into()),
        ),
    ] {
        ingest(name, SINGLE, token(), body, 422, route.clone(), 1);
    }

    for (name, body) in [
        (
            "payload changed after signing",
            fx.edited(|v| v["payload"]["acknowledged_sequence"] = 9.into()),
        ),
        (
            "sequence changed after signing",
            fx.edited(|v| v["producer_sequence"] = 9.into()),
        ),
        (
            "signature not base64",
            fx.edited(|v| v["integrity"]["signature"] = "!!!".into()),
        ),
        (
            "signature too short",
            fx.edited(|v| v["integrity"]["signature"] = "AAAA".into()),
        ),
        (
            "signature empty",
            fx.edited(|v| v["integrity"]["signature"] = "".into()),
        ),
        (
            "algorithm not Ed25519",
            fx.edited(|v| v["integrity"]["algorithm"] = "RSA".into()),
        ),
        (
            "unknown key id",
            fx.edited(|v| v["integrity"]["key_id"] = "k9".into()),
        ),
        (
            "revoked key",
            fx.edited(|v| v["integrity"]["key_id"] = "revoked-key".into()),
        ),
        (
            "another tenant's key",
            fx.edited(|v| v["integrity"]["key_id"] = "globex-key".into()),
        ),
        (
            "key id too long",
            fx.edited(|v| v["integrity"]["key_id"] = "k".repeat(129).into()),
        ),
    ] {
        ingest(name, SINGLE, token(), body, 422, signature.clone(), 1);
    }

    ingest(
        "schema_version 2 (signed)",
        SINGLE,
        token(),
        fx.signed(|e| e.schema_version = 2),
        422,
        Decided("refuse-incompatible", "schema"),
        1,
    );
    ingest(
        "schema_version 0 (signed)",
        SINGLE,
        token(),
        fx.signed(|e| e.schema_version = 0),
        422,
        Decided("refuse-incompatible", "schema"),
        1,
    );
    ingest(
        "unknown event type (signed)",
        SINGLE,
        token(),
        fx.signed(|e| e.event_type = "weather_report".into()),
        422,
        Decided("refuse-incompatible", "event-type"),
        1,
    );
    for (name, body) in [
        (
            "payload misses a field (signed)",
            fx.signed(|e| {
                e.payload.as_object_mut().unwrap().remove("version");
            }),
        ),
        (
            "payload has an unknown field (signed)",
            fx.signed(|e| e.payload["colour"] = "red".into()),
        ),
        (
            "payload string too long (signed)",
            fx.signed(|e| e.payload["producer_id"] = "p".repeat(129).into()),
        ),
        (
            "payload integer out of range (signed)",
            fx.signed(|e| e.payload["version"] = 0.into()),
        ),
        (
            "payload wrong type (signed)",
            fx.signed(|e| e.payload["version"] = "1".into()),
        ),
        (
            "payload string with a NUL (signed)",
            fx.forced(|e| e.payload["producer_id"] = "lap\u{0}top".into()),
        ),
        (
            "payload of another event type (signed)",
            fx.signed(|e| e.event_type = "approval".into()),
        ),
    ] {
        ingest(name, SINGLE, token(), body, 422, payload.clone(), 1);
    }

    // Decided refusals against the stream's state: identity conflicts and the replay floor.
    let conflict = Decided("refuse-tampered", "identity-conflict");
    let retained = fx.retained.clone();
    ingest(
        "same event id, other content",
        SINGLE,
        token(),
        fx.signed(|e| {
            e.event_id = retained.event_id.clone();
        }),
        422,
        conflict.clone(),
        1,
    );
    ingest(
        "same idempotency key, other content",
        SINGLE,
        token(),
        fx.signed(|e| {
            e.idempotency_key = retained.idempotency_key.clone();
        }),
        422,
        conflict.clone(),
        1,
    );
    ingest(
        "same sequence, other content",
        SINGLE,
        token(),
        fx.signed(|e| e.producer_sequence = 2),
        422,
        conflict.clone(),
        1,
    );
    ingest(
        "below the replay floor",
        SINGLE,
        token(),
        fx.signed(|e| e.producer_sequence = 3),
        409,
        Decided("refuse-replay", "replay"),
        1,
    );
}
