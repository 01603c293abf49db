//! A catalog of bad inputs (issue 11): the inbox's single and batch ingest and the admin API,
//! one table, one server. Every row states the answer — status, the stable outcome or code,
//! the reason — and that nothing but audit changed: every wharf table is counted before and
//! after each row, and the audit grows exactly as SPEC §3.6 says (one row for an authenticated
//! refusal, none for a request that never got a verified identity, none for the admin API,
//! which keeps no audit).
//!
//! This file holds the fixture and the test; the rows live one file per surface and run in
//! this order: [`single_unverified`], [`single_refused`], [`batch`], [`enqueue`], [`admin`].

mod admin;
mod batch;
mod enqueue;
mod single_refused;
mod single_unverified;

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

/// The whole catalog: every group's rows, in the order they run.
fn rows(fx: &Fixture) -> Vec<Row> {
    // A valid envelope, never sent: the rows whose fault is elsewhere (credential, URL, size)
    // all send these same bytes.
    let good = fx.next().to_canonical_json().unwrap();
    let mut rows = Vec::new();
    single_unverified::rows(&mut rows, fx, &good);
    single_refused::rows(&mut rows, fx, &good);
    batch::rows(&mut rows, fx, &good);
    enqueue::rows(&mut rows, fx);
    admin::rows(&mut rows, fx);
    rows
}

/// A pusher of POST rows onto `rows`, called as `(name, path, bearer, body, status, expect,
/// audit)`.
fn post_into(
    rows: &mut Vec<Row>,
) -> impl FnMut(&str, &str, Option<String>, Vec<u8>, u16, Expect, i64) + '_ {
    move |name, path, bearer, body, status, expect, audit| {
        rows.push(Row {
            name: name.to_owned(),
            method: reqwest::Method::POST,
            path: path.to_owned(),
            bearer,
            body,
            status,
            expect,
            audit,
        })
    }
}

/// Adds a POST to the admin API, which keeps no audit.
fn post(
    rows: &mut Vec<Row>,
    name: &str,
    path: &str,
    bearer: Option<String>,
    body: Vec<u8>,
    status: u16,
    expect: Expect,
) {
    post_into(rows)(name, path, bearer, body, status, expect, 0)
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
