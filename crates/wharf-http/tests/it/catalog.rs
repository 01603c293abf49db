//! A catalog of bad inputs (issue 11): the inbox's single and batch ingest and the admin API,
//! one table, one server. Every row states the answer — status, the stable outcome or code,
//! the reason — and that nothing but audit changed: every wharf table is counted before and
//! after each row, and the audit grows exactly as SPEC §3.6 says (one row for an authenticated
//! refusal, none for a request that never got a verified identity, none for the admin API,
//! which keeps no audit).

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey};
use serde_json::{Value, json};
use wharf::inbox::{self, Inbox, InboxConfig, LimitPolicy};
use wharf::outbox::Registry;
use wharf_client::{Producer, ProducerConfig};
use wharf_core::envelope::Envelope;
use wharf_http::auth::OperatorToken;
use wharf_testkit::TestDb;

use crate::support::{Noop, census, http, serve};

const TENANT: &str = "acme";
const PROJECT: &str = "web";
const OPERATOR: &str = "operator-secret";
/// Small limits so the rows that pass them stay cheap.
const BODY_MAX: usize = 64 * 1024;
const BATCH_BODY_MAX: usize = 256 * 1024;
const BATCH_ENVELOPES_MAX: usize = 8;
/// Fewer envelopes than [`BATCH_ENVELOPES_MAX`]: a batch between the two is over the burst.
const IDENTITY_BURST: u32 = 5;
/// The stream's cursor while the catalog runs (after an operator skip), and its replay floor.
const CURSOR: u64 = 5;

/// What a row expects.
#[derive(Debug, Clone)]
enum Expect {
    /// A decided single envelope: `outcome` and `reason`, on the catalog's stream.
    Decided(&'static str, &'static str),
    /// As `Decided`, answered with another stream's cursor (the URL names another project).
    DecidedAt(&'static str, &'static str, u64),
    /// An error answer: `code`, and a fragment its `reason` holds (the whole reason where it
    /// is a stable token).
    Error(&'static str, &'static str),
    /// A decided batch: one (outcome, reason) per envelope.
    Batch(Vec<(&'static str, &'static str)>),
}

struct Row {
    name: String,
    method: reqwest::Method,
    path: String,
    bearer: Option<String>,
    body: Vec<u8>,
    status: u16,
    expect: Expect,
    /// Audit rows this request appends.
    audit: i64,
}

/// The signing and sending side of the catalog.
struct Fixture {
    db: TestDb,
    base: String,
    token: String,
    revoked_token: String,
    globex_token: String,
    producer: Producer,
    seed: [u8; 32],
    /// The first accepted envelope, retained (sequence 1).
    retained: Envelope,
    /// An ADMITTED action (not a proposal) and its key.
    admitted_id: i64,
}

fn cursor(n: u64) -> Value {
    json!({"producer_id": "laptop-1", "acknowledged_sequence": n,
           "acknowledged_event_id": null, "version": 1})
}

async fn fixture() -> Fixture {
    let db = TestDb::new().await;
    inbox::create_tenant(&db.pool, TENANT).await.unwrap();
    inbox::create_tenant(&db.pool, "globex").await.unwrap();
    let credential = inbox::issue_credential(&db.pool, TENANT, "alice", Some("laptop-1"))
        .await
        .unwrap();
    let revoked = inbox::issue_credential(&db.pool, TENANT, "bob", None)
        .await
        .unwrap();
    inbox::revoke_credential(&db.pool, TENANT, revoked.credential_id)
        .await
        .unwrap();
    let globex = inbox::issue_credential(&db.pool, "globex", "carol", None)
        .await
        .unwrap();
    let key = inbox::generate_key(
        &db.pool,
        TENANT,
        PROJECT,
        Some("k1"),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();
    inbox::add_key(
        &db.pool,
        TENANT,
        PROJECT,
        "revoked-key",
        SigningKey::from_bytes(&[6; 32]).verifying_key().as_bytes(),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();
    inbox::revoke_key(&db.pool, TENANT, PROJECT, "revoked-key")
        .await
        .unwrap();
    inbox::add_key(
        &db.pool,
        "globex",
        PROJECT,
        "globex-key",
        SigningKey::from_bytes(&[5; 32]).verifying_key().as_bytes(),
        inbox::KEY_REPLAY_WINDOW_DEFAULT,
    )
    .await
    .unwrap();

    let inbox = Arc::new(Inbox::new(
        db.pool.clone(),
        InboxConfig {
            peer_limit: LimitPolicy::UNLIMITED,
            identity_limit: LimitPolicy {
                rate_per_s: 1_000_000.0,
                burst: IDENTITY_BURST,
            },
            body_bytes_max: BODY_MAX,
            batch_body_bytes_max: BATCH_BODY_MAX,
            batch_envelopes_max: BATCH_ENVELOPES_MAX,
            ..InboxConfig::default()
        },
    ));
    let mut registry = Registry::new();
    registry.register(Arc::new(Noop)).unwrap();
    let operator = OperatorToken::new(Some(OPERATOR.into()));
    let base = serve(wharf_http::app([
        wharf_http::ingest::routes(inbox),
        wharf_http::actions::routes(db.pool.clone(), Arc::new(registry), operator.clone()),
        wharf_http::dead_letters::routes(db.pool.clone(), operator),
        wharf_http::health::routes(db.pool.clone(), None),
    ]))
    .await;

    let mut config = ProducerConfig::new(
        base.clone(),
        TENANT,
        PROJECT,
        credential.token.clone(),
        key.key_id.clone(),
        key.private_seed,
    );
    config.attempts_max = 1;
    let producer = Producer::new(config, 1).unwrap();
    // State for "nothing changed" to be checked against: two accepted envelopes (1, 2), an
    // operator skip to 5 and the floor raised to 5 (so 3 and 4 are below it and were never
    // stored: a replay), and one action.
    let retained = producer.envelope("sync_cursor", cursor(0), None).unwrap();
    assert!(producer.send(&retained).await.unwrap().is_acknowledged());
    let second = producer.envelope("sync_cursor", cursor(1), None).unwrap();
    assert!(producer.send(&second).await.unwrap().is_acknowledged());
    let mut conn = db.pool.acquire().await.unwrap();
    let stream = inbox::StreamId {
        tenant: TENANT.into(),
        project: PROJECT.into(),
        producer: inbox::Producer::Device("laptop-1".into()),
    };
    inbox::streams::skip(&mut conn, &stream, CURSOR, "catalog", "3 and 4 are lost")
        .await
        .unwrap();
    inbox::streams::advance_floor(&mut conn, &stream, CURSOR, "catalog", "no replays of 3, 4")
        .await
        .unwrap();
    drop(conn);
    let enqueued = http()
        .post(format!("{base}/v1/actions"))
        .bearer_auth(OPERATOR)
        .json(&admin_request("taken"))
        .send()
        .await
        .unwrap();
    assert_eq!(enqueued.status(), 201);
    let admitted_id = enqueued.json::<Value>().await.unwrap()["id"]
        .as_i64()
        .unwrap();
    Fixture {
        db,
        base,
        token: credential.token,
        revoked_token: revoked.token,
        globex_token: globex.token,
        producer,
        seed: key.private_seed,
        retained,
        admitted_id,
    }
}

fn admin_request(key: &str) -> Value {
    json!({"kind": "noop", "tenant_id": "t1", "lane_key": "lane-1",
           "idempotency_key": key, "payload": {"n": 1}})
}

impl Fixture {
    /// A fresh, validly signed envelope at the next sequence, never sent.
    fn next(&self) -> Envelope {
        let mut e = self.retained.clone();
        e.event_id = ulid::Ulid::new().to_string();
        e.idempotency_key = e.event_id.clone();
        e.producer_sequence = CURSOR + 1;
        e.payload = cursor(CURSOR);
        self.producer.sign(&e).unwrap()
    }

    /// `e` changed by `change` and signed again: a genuine producer's bad envelope.
    fn signed(&self, change: impl FnOnce(&mut Envelope)) -> Vec<u8> {
        let mut e = self.next();
        change(&mut e);
        let e = self.producer.sign(&e).unwrap();
        e.to_canonical_json().unwrap()
    }

    /// The JSON of a fresh signed envelope changed by `change` afterwards (what a forger or a
    /// broken producer sends; signed bytes no longer match where that matters).
    fn edited(&self, change: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut v: Value =
            serde_json::from_slice(&self.next().to_canonical_json().unwrap()).unwrap();
        change(&mut v);
        serde_json::to_vec(&v).unwrap()
    }

    /// A fresh envelope's JSON text with `from` replaced by `to` (for what `serde_json`
    /// cannot write: floats, duplicate keys, lone surrogates, huge integers).
    fn text(&self, from: &str, to: &str) -> Vec<u8> {
        let text = String::from_utf8(self.next().to_canonical_json().unwrap()).unwrap();
        assert!(text.contains(from), "{from} not in {text}");
        text.replacen(from, to, 1).into_bytes()
    }

    /// An envelope whose signature is made over its exact canonical bytes by this producer's
    /// key, even when it breaks a bound that `sign` would refuse.
    fn forced(&self, change: impl FnOnce(&mut Envelope)) -> Vec<u8> {
        let mut e = self.next();
        change(&mut e);
        e.integrity.signature = String::new();
        let bytes = wharf_core::sign::signing_bytes(&e).unwrap();
        let signature = SigningKey::from_bytes(&self.seed).sign(&bytes);
        e.integrity.signature =
            base64::engine::general_purpose::STANDARD.encode(signature.to_bytes());
        e.to_canonical_json().unwrap()
    }
}

const SINGLE: &str = "/v1/tenants/acme/projects/web/envelopes";
const BATCH: &str = "/v1/tenants/acme/projects/web/envelopes:batch";

fn batch_of(items: &[Vec<u8>]) -> Vec<u8> {
    let items: Vec<String> = items
        .iter()
        .map(|b| String::from_utf8(b.clone()).unwrap())
        .collect();
    format!("{{\"envelopes\":[{}]}}", items.join(",")).into_bytes()
}

fn rows(fx: &Fixture) -> Vec<Row> {
    use Expect::*;
    use reqwest::Method;
    let mut rows = Vec::new();
    let token = || Some(fx.token.clone());
    let mut ingest =
        |name: &str, path: &str, bearer: Option<String>, body: Vec<u8>, status, expect, audit| {
            rows.push(Row {
                name: name.to_owned(),
                method: Method::POST,
                path: path.to_owned(),
                bearer,
                body,
                status,
                expect,
                audit,
            })
        };
    let good = fx.next().to_canonical_json().unwrap();

    // --- ingest, single: no verified identity, nothing audited -------------------------
    let unauth = Error("unauthenticated", "unauthenticated");
    ingest(
        "no credential",
        SINGLE,
        None,
        good.clone(),
        401,
        unauth.clone(),
        0,
    );
    ingest(
        "unknown token",
        SINGLE,
        Some("wharf_nope".into()),
        good.clone(),
        401,
        unauth.clone(),
        0,
    );
    ingest(
        "empty token",
        SINGLE,
        Some(String::new()),
        good.clone(),
        401,
        unauth.clone(),
        0,
    );
    ingest(
        "revoked credential",
        SINGLE,
        Some(fx.revoked_token.clone()),
        good.clone(),
        401,
        unauth.clone(),
        0,
    );
    ingest(
        "a token of another form",
        SINGLE,
        Some("not-a-wharf-token".into()),
        good.clone(),
        401,
        unauth.clone(),
        0,
    );
    ingest(
        "token one character short",
        SINGLE,
        Some(fx.token[..fx.token.len() - 1].to_owned()),
        good.clone(),
        401,
        unauth.clone(),
        0,
    );
    let too_large = Error("payload-too-large", "body-too-large");
    ingest(
        "body over the limit",
        SINGLE,
        token(),
        vec![b' '; BODY_MAX + 1],
        413,
        too_large.clone(),
        0,
    );
    ingest(
        "body over the limit, no credential",
        SINGLE,
        None,
        vec![b' '; BODY_MAX + 1],
        413,
        too_large.clone(),
        0,
    );

    // --- ingest, single: authenticated refusals, one audit row each ---------------------
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
            [b"\xef\xbb\xbf".as_slice(), &good].concat(),
        ),
        (
            "bytes after the envelope",
            [good.as_slice(), b" {}"].concat(),
        ),
    ] {
        ingest(name, SINGLE, token(), body, 422, payload.clone(), 1);
    }
    ingest(
        "an unknown field",
        SINGLE,
        token(),
        fx.edited(|v| v["colour"] = "red".into()),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "an unknown integrity field",
        SINGLE,
        token(),
        fx.edited(|v| v["integrity"]["x"] = 1.into()),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "a missing field",
        SINGLE,
        token(),
        fx.edited(|v| {
            v.as_object_mut().unwrap().remove("producer_version");
        }),
        422,
        payload.clone(),
        1,
    );
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
    ingest(
        "schema_version as a string",
        SINGLE,
        token(),
        fx.edited(|v| v["schema_version"] = "1".into()),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "payload not an object",
        SINGLE,
        token(),
        fx.edited(|v| v["payload"] = json!([1])),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "a float in the payload",
        SINGLE,
        token(),
        fx.text("\"version\":1", "\"version\":1.5"),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "an exponent in the payload",
        SINGLE,
        token(),
        fx.text("\"version\":1", "\"version\":1e0"),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "a duplicate key",
        SINGLE,
        token(),
        fx.text("\"version\":1", "\"version\":1,\"version\":1"),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "a lone surrogate",
        SINGLE,
        token(),
        fx.text("\"laptop-1\"", "\"\\ud800\""),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "an integer past u64",
        SINGLE,
        token(),
        fx.text("\"version\":1", "\"version\":18446744073709551616"),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "nesting past the depth limit",
        SINGLE,
        token(),
        fx.text(
            "\"version\":1",
            &format!("\"version\":{}1{}", "[".repeat(70), "]".repeat(70)),
        ),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "occurred_at not a timestamp",
        SINGLE,
        token(),
        fx.edited(|v| v["occurred_at"] = "yesterday".into()),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "producer_version empty",
        SINGLE,
        token(),
        fx.edited(|v| v["producer_version"] = "".into()),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "producer_version too long",
        SINGLE,
        token(),
        fx.edited(|v| v["producer_version"] = "v".repeat(65).into()),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "event_type not a name",
        SINGLE,
        token(),
        fx.edited(|v| v["event_type"] = "Sync-Cursor".into()),
        422,
        payload.clone(),
        1,
    );

    ingest(
        "URL tenant not the credential's",
        "/v1/tenants/globex/projects/web/envelopes",
        token(),
        good.clone(),
        422,
        route.clone(),
        1,
    );
    // A refusal answers the cursor of the stream its URL names: another project's is 0.
    let other_stream = DecidedAt("refuse-tampered", "route", 0);
    ingest(
        "URL project not the envelope's",
        "/v1/tenants/acme/projects/other/envelopes",
        token(),
        good.clone(),
        422,
        other_stream.clone(),
        1,
    );
    ingest(
        "URL project not an identity",
        "/v1/tenants/acme/projects/a%20b/envelopes",
        token(),
        good.clone(),
        422,
        other_stream.clone(),
        1,
    );
    ingest(
        "URL project with a NUL",
        "/v1/tenants/acme/projects/w%00eb/envelopes",
        token(),
        good.clone(),
        422,
        other_stream.clone(),
        1,
    );
    ingest(
        "envelope tenant not the URL's (signed)",
        SINGLE,
        token(),
        fx.signed(|e| e.tenant_id = "globex".into()),
        422,
        route.clone(),
        1,
    );
    ingest(
        "envelope project not the URL's (signed)",
        SINGLE,
        token(),
        fx.signed(|e| e.project_id = "other".into()),
        422,
        route.clone(),
        1,
    );
    ingest(
        "tenant_id not an identity",
        SINGLE,
        token(),
        fx.edited(|v| v["tenant_id"] = "ac me".into()),
        422,
        route.clone(),
        1,
    );
    ingest(
        "project_id with a NUL",
        SINGLE,
        token(),
        fx.edited(|v| v["project_id"] = "w\u{0}b".into()),
        422,
        route.clone(),
        1,
    );
    ingest(
        "event_id not a ULID",
        SINGLE,
        token(),
        fx.edited(|v| v["event_id"] = "not-a-ulid".into()),
        422,
        route.clone(),
        1,
    );
    ingest(
        "event_id lowercase",
        SINGLE,
        token(),
        fx.edited(|v| {
            let id = v["event_id"].as_str().unwrap().to_lowercase();
            v["event_id"] = id.into();
        }),
        422,
        route.clone(),
        1,
    );
    ingest(
        "idempotency_key empty",
        SINGLE,
        token(),
        fx.edited(|v| v["idempotency_key"] = "".into()),
        422,
        route.clone(),
        1,
    );
    ingest(
        "idempotency_key too long",
        SINGLE,
        token(),
        fx.edited(|v| v["idempotency_key"] = "k".repeat(257).into()),
        422,
        route.clone(),
        1,
    );
    ingest(
        "idempotency_key with a NUL",
        SINGLE,
        token(),
        fx.edited(|v| v["idempotency_key"] = "k\u{0}x".into()),
        422,
        route.clone(),
        1,
    );
    ingest(
        "producer_sequence 0",
        SINGLE,
        token(),
        fx.edited(|v| v["producer_sequence"] = 0.into()),
        422,
        route.clone(),
        1,
    );
    ingest(
        "producer_sequence negative",
        SINGLE,
        token(),
        fx.edited(|v| v["producer_sequence"] = (-1).into()),
        422,
        route.clone(),
        1,
    );
    ingest(
        "producer_sequence a string",
        SINGLE,
        token(),
        fx.edited(|v| v["producer_sequence"] = "3".into()),
        422,
        route.clone(),
        1,
    );

    ingest(
        "payload changed after signing",
        SINGLE,
        token(),
        fx.edited(|v| v["payload"]["acknowledged_sequence"] = 9.into()),
        422,
        signature.clone(),
        1,
    );
    ingest(
        "sequence changed after signing",
        SINGLE,
        token(),
        fx.edited(|v| v["producer_sequence"] = 9.into()),
        422,
        signature.clone(),
        1,
    );
    ingest(
        "signature not base64",
        SINGLE,
        token(),
        fx.edited(|v| v["integrity"]["signature"] = "!!!".into()),
        422,
        signature.clone(),
        1,
    );
    ingest(
        "signature too short",
        SINGLE,
        token(),
        fx.edited(|v| v["integrity"]["signature"] = "AAAA".into()),
        422,
        signature.clone(),
        1,
    );
    ingest(
        "signature empty",
        SINGLE,
        token(),
        fx.edited(|v| v["integrity"]["signature"] = "".into()),
        422,
        signature.clone(),
        1,
    );
    ingest(
        "algorithm not Ed25519",
        SINGLE,
        token(),
        fx.edited(|v| v["integrity"]["algorithm"] = "RSA".into()),
        422,
        signature.clone(),
        1,
    );
    ingest(
        "unknown key id",
        SINGLE,
        token(),
        fx.edited(|v| v["integrity"]["key_id"] = "k9".into()),
        422,
        signature.clone(),
        1,
    );
    ingest(
        "revoked key",
        SINGLE,
        token(),
        fx.edited(|v| v["integrity"]["key_id"] = "revoked-key".into()),
        422,
        signature.clone(),
        1,
    );
    ingest(
        "another tenant's key",
        SINGLE,
        token(),
        fx.edited(|v| v["integrity"]["key_id"] = "globex-key".into()),
        422,
        signature.clone(),
        1,
    );
    ingest(
        "key id too long",
        SINGLE,
        token(),
        fx.edited(|v| v["integrity"]["key_id"] = "k".repeat(129).into()),
        422,
        signature.clone(),
        1,
    );

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
    ingest(
        "payload misses a field (signed)",
        SINGLE,
        token(),
        fx.signed(|e| {
            e.payload.as_object_mut().unwrap().remove("version");
        }),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "payload has an unknown field (signed)",
        SINGLE,
        token(),
        fx.signed(|e| e.payload["colour"] = "red".into()),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "payload string too long (signed)",
        SINGLE,
        token(),
        fx.signed(|e| e.payload["producer_id"] = "p".repeat(129).into()),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "payload integer out of range (signed)",
        SINGLE,
        token(),
        fx.signed(|e| e.payload["version"] = 0.into()),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "payload wrong type (signed)",
        SINGLE,
        token(),
        fx.signed(|e| e.payload["version"] = "1".into()),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "payload string with a NUL (signed)",
        SINGLE,
        token(),
        fx.forced(|e| e.payload["producer_id"] = "lap\u{0}top".into()),
        422,
        payload.clone(),
        1,
    );
    ingest(
        "payload of another event type (signed)",
        SINGLE,
        token(),
        fx.signed(|e| e.event_type = "approval".into()),
        422,
        payload.clone(),
        1,
    );

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

    // --- ingest, batch -------------------------------------------------------------------
    ingest(
        "batch, no credential",
        BATCH,
        None,
        batch_of(std::slice::from_ref(&good)),
        401,
        unauth.clone(),
        0,
    );
    ingest(
        "batch, revoked credential",
        BATCH,
        Some(fx.revoked_token.clone()),
        batch_of(std::slice::from_ref(&good)),
        401,
        unauth.clone(),
        0,
    );
    ingest(
        "batch over the body limit",
        BATCH,
        token(),
        vec![b' '; BATCH_BODY_MAX + 1],
        413,
        too_large.clone(),
        0,
    );
    let burst: Vec<Vec<u8>> = (0..=IDENTITY_BURST).map(|_| good.clone()).collect();
    ingest(
        "batch over the identity burst",
        BATCH,
        token(),
        batch_of(&burst),
        413,
        Error("payload-too-large", "batch-over-burst"),
        0,
    );
    for (name, body) in [
        ("batch, empty body", b"".to_vec()),
        ("batch, not JSON", b"{\"envelopes\":".to_vec()),
        ("batch, an array", b"[]".to_vec()),
        ("batch, no list", b"{}".to_vec()),
        ("batch, an empty list", b"{\"envelopes\":[]}".to_vec()),
        ("batch, list is a string", b"{\"envelopes\":\"x\"}".to_vec()),
        (
            "batch, an unknown member",
            [b"{\"colour\":1,\"envelopes\":[".as_slice(), &good, b"]}"].concat(),
        ),
        (
            "batch, more envelopes than allowed",
            batch_of(&vec![b"1".to_vec(); BATCH_ENVELOPES_MAX + 1]),
        ),
    ] {
        ingest(name, BATCH, token(), body, 422, payload.clone(), 1);
    }
    let items = vec![
        fx.edited(|v| v["payload"]["acknowledged_sequence"] = 9.into()),
        fx.signed(|e| e.tenant_id = "globex".into()),
        fx.signed(|e| e.schema_version = 2),
        b"5".to_vec(),
        fx.signed(|e| e.event_type = "weather_report".into()),
    ];
    ingest(
        "batch of five refusals",
        BATCH,
        token(),
        batch_of(&items),
        200,
        Batch(vec![
            ("refuse-tampered", "signature"),
            ("refuse-tampered", "route"),
            ("refuse-incompatible", "schema"),
            ("refuse-tampered", "payload"),
            ("refuse-incompatible", "event-type"),
        ]),
        5,
    );
    ingest(
        "batch of conflicts and a replay",
        BATCH,
        token(),
        batch_of(&[
            fx.signed(|e| e.event_id = retained.event_id.clone()),
            fx.signed(|e| e.producer_sequence = 4),
        ]),
        200,
        Batch(vec![
            ("refuse-tampered", "identity-conflict"),
            ("refuse-replay", "replay"),
        ]),
        2,
    );
    ingest(
        "batch at the wrong tenant",
        "/v1/tenants/globex/projects/web/envelopes:batch",
        token(),
        batch_of(std::slice::from_ref(&good)),
        200,
        Batch(vec![("refuse-tampered", "route")]),
        1,
    );

    // --- the admin API: no audit --------------------------------------------------------
    let admin = |r: Value| serde_json::to_vec(&r).unwrap();
    let with = |change: &dyn Fn(&mut Value)| {
        let mut r = admin_request("fresh-key");
        change(&mut r);
        admin(r)
    };
    let op = || Some(OPERATOR.to_owned());
    let unauthorized = Error("unauthorized", "operator token");
    let invalid = |fragment| Error("invalid-request", fragment);
    let post = |rows: &mut Vec<Row>, name: &str, path: &str, bearer, body, status, expect| {
        rows.push(Row {
            name: name.to_owned(),
            method: Method::POST,
            path: path.to_owned(),
            bearer,
            body,
            status,
            expect,
            audit: 0,
        })
    };
    post(
        &mut rows,
        "enqueue, no token",
        "/v1/actions",
        None,
        admin(admin_request("k")),
        401,
        unauthorized.clone(),
    );
    post(
        &mut rows,
        "enqueue, wrong token",
        "/v1/actions",
        Some("nope".into()),
        admin(admin_request("k")),
        401,
        unauthorized.clone(),
    );
    post(
        &mut rows,
        "enqueue, a producer's credential",
        "/v1/actions",
        token(),
        admin(admin_request("k")),
        401,
        unauthorized.clone(),
    );
    post(
        &mut rows,
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
            &mut rows,
            name,
            "/v1/actions",
            op(),
            body,
            400,
            invalid(fragment),
        );
    }
    post(
        &mut rows,
        "enqueue, unknown kind",
        "/v1/actions",
        op(),
        with(&|r| r["kind"] = "fax".into()),
        400,
        Error("unknown-kind", "fax"),
    );
    post(
        &mut rows,
        "enqueue, NUL in the kind",
        "/v1/actions",
        op(),
        with(&|r| r["kind"] = "no\u{0}op".into()),
        400,
        Error("unknown-kind", "no"),
    );
    post(
        &mut rows,
        "enqueue, refused by the adapter",
        "/v1/actions",
        op(),
        with(&|r| r["payload"] = json!({"refuse": true})),
        400,
        Error("payload-refused", "asked to refuse"),
    );
    post(
        &mut rows,
        "enqueue, key taken with other content",
        "/v1/actions",
        op(),
        admin(
            json!({"kind": "noop", "tenant_id": "t1", "lane_key": "lane-1", "idempotency_key": "taken", "payload": {"n": 2}}),
        ),
        409,
        Error("idempotency-conflict", "different content"),
    );

    let admitted = fx.admitted_id;
    for verb in ["admit", "refuse"] {
        post(
            &mut rows,
            &format!("{verb}, no token"),
            &format!("/v1/actions/{admitted}/{verb}"),
            None,
            Vec::new(),
            401,
            unauthorized.clone(),
        );
        post(
            &mut rows,
            &format!("{verb}, not a proposal"),
            &format!("/v1/actions/{admitted}/{verb}"),
            op(),
            Vec::new(),
            409,
            Error("not-proposed", "only a PROPOSED action can"),
        );
        post(
            &mut rows,
            &format!("{verb}, unknown action"),
            &format!("/v1/actions/424242/{verb}"),
            op(),
            Vec::new(),
            404,
            Error("not-found", "no action 424242"),
        );
        post(
            &mut rows,
            &format!("{verb}, id not a number"),
            &format!("/v1/actions/x/{verb}"),
            op(),
            Vec::new(),
            400,
            invalid("`id`"),
        );
    }
    let mut request =
        |name: &str, method: Method, path: &str, bearer: Option<String>, status, expect| {
            rows.push(Row {
                name: name.to_owned(),
                method,
                path: path.to_owned(),
                bearer,
                body: Vec::new(),
                status,
                expect,
                audit: 0,
            })
        };
    request(
        "show, no token",
        Method::GET,
        &format!("/v1/actions/{admitted}"),
        None,
        401,
        unauthorized.clone(),
    );
    request(
        "show, unknown action",
        Method::GET,
        "/v1/actions/424242",
        op(),
        404,
        Error("not-found", "no action 424242"),
    );
    request(
        "show, id a word",
        Method::GET,
        "/v1/actions/abc",
        op(),
        400,
        invalid("`id`"),
    );
    request(
        "show, id a fraction",
        Method::GET,
        "/v1/actions/1.5",
        op(),
        400,
        invalid("`id`"),
    );
    request(
        "show, id past i64",
        Method::GET,
        "/v1/actions/99999999999999999999",
        op(),
        400,
        invalid("`id`"),
    );
    request(
        "erase, no token",
        Method::DELETE,
        "/v1/subjects/acct/actions",
        None,
        401,
        unauthorized.clone(),
    );
    request(
        "erase, NUL in the account",
        Method::DELETE,
        "/v1/subjects/a%00b/actions",
        op(),
        400,
        invalid("account must not contain U+0000"),
    );
    let dead = "/v1/tenants/acme/projects/web/dead-letters";
    request(
        "dead letters, no credential",
        Method::GET,
        dead,
        None,
        401,
        Error("unauthorized", "credential of this tenant"),
    );
    request(
        "dead letters, another tenant's credential",
        Method::GET,
        dead,
        Some(fx.globex_token.clone()),
        403,
        Error("forbidden", "another tenant"),
    );
    request(
        "dead letters, a revoked credential",
        Method::GET,
        dead,
        Some(fx.revoked_token.clone()),
        401,
        Error("unauthorized", "credential of this tenant"),
    );
    request(
        "dead letters, limit a word",
        Method::GET,
        &format!("{dead}?limit=many"),
        op(),
        400,
        invalid("limit"),
    );
    request(
        "dead letters, limit over 100",
        Method::GET,
        &format!("{dead}?limit=101"),
        op(),
        400,
        invalid("limit"),
    );
    request(
        "dead letters, a cursor nobody made",
        Method::GET,
        &format!("{dead}?after=zzz"),
        op(),
        400,
        invalid("cursor"),
    );
    request(
        "dead letters, an unknown parameter",
        Method::GET,
        &format!("{dead}?colour=red"),
        op(),
        400,
        invalid("colour"),
    );
    request(
        "dead letters, NUL in the tenant",
        Method::GET,
        "/v1/tenants/a%00b/projects/web/dead-letters",
        op(),
        400,
        invalid("U+0000"),
    );
    request(
        "unknown route",
        Method::GET,
        "/v1/nothing",
        op(),
        404,
        Error("not-found", "no such route"),
    );
    request(
        "wrong method",
        Method::PUT,
        "/v1/actions",
        op(),
        405,
        Error("method-not-allowed", "Allow"),
    );
    request(
        "wrong method on ingest",
        Method::GET,
        SINGLE,
        token(),
        405,
        Error("method-not-allowed", "Allow"),
    );
    rows
}

/// Every table's rows, with the audit table's set aside.
fn split_audit(mut counts: BTreeMap<String, i64>) -> (BTreeMap<String, i64>, i64) {
    let audit = counts
        .remove("inbox_audit")
        .expect("the audit table is counted");
    (counts, audit)
}

#[tokio::test]
async fn every_bad_input_is_answered_as_catalogued_and_changes_nothing_but_audit() {
    let fx = fixture().await;
    let rows = rows(&fx);
    assert!(rows.len() >= 100, "the catalog has {} rows", rows.len());
    let client = http();
    let mut failures = Vec::new();
    for row in &rows {
        let (before, audit_before) = split_audit(census(&fx.db.pool).await);
        let mut request = client
            .request(row.method.clone(), format!("{}{}", fx.base, row.path))
            .body(row.body.clone());
        if let Some(bearer) = &row.bearer {
            request = request.header("authorization", format!("Bearer {bearer}"));
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let header = response
            .headers()
            .get("x-correlation-id")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let (after, audit_after) = split_audit(census(&fx.db.pool).await);

        let mut wrong = Vec::new();
        if status != row.status {
            wrong.push(format!("status {status}, expected {}", row.status));
        }
        match &row.expect {
            Expect::Decided(outcome, reason) | Expect::DecidedAt(outcome, reason, _) => {
                if (body["outcome"].as_str(), body["reason"].as_str())
                    != (Some(*outcome), Some(*reason))
                {
                    wrong.push(format!("expected {outcome}/{reason}"));
                }
                let cursor = match row.expect {
                    Expect::DecidedAt(_, _, cursor) => cursor,
                    _ => CURSOR,
                };
                if body["acknowledged_sequence"] != cursor {
                    wrong.push(format!("the cursor is not {cursor}"));
                }
            }
            Expect::Error(code, fragment) => {
                let keys: Vec<&str> = body
                    .as_object()
                    .map(|o| o.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                if keys != ["code", "correlation_id", "reason"] {
                    wrong.push("not the one error shape".into());
                }
                if body["code"].as_str() != Some(code)
                    || !body["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains(fragment))
                {
                    wrong.push(format!(
                        "expected {code} with a reason holding {fragment:?}"
                    ));
                }
            }
            Expect::Batch(items) => {
                let got: Vec<(&str, &str)> = body["results"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|i| {
                                (
                                    i["outcome"].as_str().unwrap_or(""),
                                    i["reason"].as_str().unwrap_or(""),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if &got != items {
                    wrong.push(format!("expected items {items:?}"));
                }
                if body["acknowledged_sequence"] != CURSOR {
                    wrong.push(format!("the cursor is not {CURSOR}"));
                }
            }
        }
        if body["correlation_id"].as_str() != header.as_deref() {
            wrong.push("the body's correlation id is not the header's".into());
        }
        if before != after {
            wrong.push(format!("tables changed: {before:?} -> {after:?}"));
        }
        if audit_after - audit_before != row.audit {
            wrong.push(format!(
                "{} audit row(s), expected {}",
                audit_after - audit_before,
                row.audit
            ));
        } else if row.audit > 0 {
            // The audit rows are this request's.
            let mine: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM wharf.inbox_audit WHERE correlation_id = $1",
            )
            .bind(header.as_deref().unwrap_or_default())
            .fetch_one(&fx.db.pool)
            .await
            .unwrap();
            if mine != row.audit {
                wrong.push(format!("{mine} audit row(s) carry its correlation id"));
            }
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "{}: {}\n    got {status} {body}",
                row.name,
                wrong.join("; ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
    println!("catalog: {} bad inputs, all as catalogued", rows.len());
}
