//! A tenant `acme` with project `web`, a device credential and an active key, on a fresh
//! database; helpers to build, sign and send envelopes and to count rows.

use std::net::IpAddr;
use std::sync::Arc;

use ed25519_dalek::SigningKey;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use sqlx::PgPool;
use wharf::core::envelope::{Envelope, Integrity};
use wharf::inbox::{self, BatchResponse, Inbox, InboxConfig, LimitPolicy, Response, Route};
use wharf_testkit::TestDb;

pub const TENANT: &str = "acme";
pub const PROJECT: &str = "web";

/// A limiter policy that never gets in the way of a test that is not about limits.
pub fn unlimited() -> InboxConfig {
    InboxConfig {
        peer_limit: LimitPolicy::UNLIMITED,
        identity_limit: LimitPolicy::UNLIMITED,
        ..InboxConfig::default()
    }
}

pub fn peer() -> IpAddr {
    "192.0.2.10".parse().unwrap()
}

/// A canonical ULID-shaped event id for `n`: "0" and 25 Crockford digits.
pub fn event_id(n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let mut out = vec![b'0'; 26];
    let mut v = u128::from(n);
    for slot in out.iter_mut().skip(1).rev() {
        *slot = DIGITS[(v % 32) as usize];
        v /= 32;
    }
    String::from_utf8(out).unwrap()
}

/// A valid run_summary payload; `marker` lands in `run_id` so tests can search for it.
pub fn payload(marker: &str) -> Value {
    json!({
        "run_id": marker,
        "task_id": "task-1",
        "agent_id": "agent-1",
        "status": "succeeded",
        "started_at": "2025-06-01T12:00:00Z",
        "finished_at": "2025-06-01T12:05:00Z",
        "commit_ids": ["0123abcd"],
        "checks": [{"name": "build", "result": "pass"}],
    })
}

pub struct Fx {
    pub db: TestDb,
    pub inbox: Arc<Inbox>,
    pub token: String,
    pub key: SigningKey,
    pub key_id: String,
}

impl Fx {
    pub async fn new() -> Fx {
        Fx::with_config(unlimited()).await
    }

    pub async fn with_config(config: InboxConfig) -> Fx {
        let db = TestDb::new().await;
        inbox::create_tenant(&db.pool, TENANT).await.unwrap();
        let credential = inbox::issue_credential(&db.pool, TENANT, "alice", Some("laptop-1"))
            .await
            .unwrap();
        let generated = inbox::generate_key(
            &db.pool,
            TENANT,
            PROJECT,
            Some("key-1"),
            inbox::KEY_REPLAY_WINDOW_DEFAULT,
        )
        .await
        .unwrap();
        let inbox = Arc::new(Inbox::new(db.pool.clone(), config));
        Fx {
            db,
            inbox,
            token: credential.token,
            key: SigningKey::from_bytes(&generated.private_seed),
            key_id: generated.key_id,
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.db.pool
    }

    /// An unsigned envelope with sequence `seq`, event id `event_id(seq)`, key `k-{seq}`.
    pub fn envelope(&self, seq: u64) -> Envelope {
        Envelope {
            schema_version: 1,
            event_type: "run_summary".into(),
            tenant_id: TENANT.into(),
            project_id: PROJECT.into(),
            event_id: event_id(seq),
            producer_sequence: seq,
            occurred_at: "2025-06-01T12:00:00Z".into(),
            idempotency_key: format!("k-{seq}"),
            producer_version: "wharf-tests/1".into(),
            payload: payload(&format!("run-{seq}")),
            integrity: Integrity {
                algorithm: "Ed25519".into(),
                key_id: String::new(),
                signature: String::new(),
            },
        }
    }

    /// `envelope` signed with the fixture's key, as wire bytes.
    pub fn signed(&self, envelope: &Envelope) -> Vec<u8> {
        sign_with(envelope, &self.key, &self.key_id)
    }

    /// The wire bytes of envelope `seq`.
    pub fn body(&self, seq: u64) -> Vec<u8> {
        self.signed(&self.envelope(seq))
    }

    pub async fn send(&self, body: &[u8]) -> Response {
        self.inbox
            .ingest(peer(), &self.token, Route::new(TENANT, PROJECT), body)
            .await
    }

    /// Sends a batch body ([`batch_body`]) to the batch endpoint.
    pub async fn send_batch(&self, body: &[u8]) -> BatchResponse {
        self.inbox
            .ingest_batch(peer(), &self.token, Route::new(TENANT, PROJECT), body)
            .await
    }

    pub async fn counts(&self) -> Counts {
        counts(self.pool()).await
    }

    pub async fn cursor(&self) -> (u64, u64) {
        let row: Option<(String, String)> = sqlx::query_as(
            "SELECT acknowledged_sequence::text, replay_floor::text FROM wharf.inbox_streams
              WHERE tenant_id = $1 AND project_id = $2",
        )
        .bind(TENANT)
        .bind(PROJECT)
        .fetch_optional(self.pool())
        .await
        .unwrap();
        row.map_or((0, 1), |(a, f)| (a.parse().unwrap(), f.parse().unwrap()))
    }
}

pub fn sign_with(envelope: &Envelope, key: &SigningKey, key_id: &str) -> Vec<u8> {
    wharf::core::sign::sign(envelope, key, key_id)
        .unwrap()
        .to_canonical_json()
        .unwrap()
}

/// The reason a response carries for an audited reason: the `signature-*` family is folded into
/// `signature` for the producer, and kept distinct in the audit.
pub fn answered(audit_reason: &str) -> &str {
    if audit_reason.starts_with("signature") {
        "signature"
    } else {
        audit_reason
    }
}

/// Rows in every inbox table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub streams: i64,
    pub identities: i64,
    pub payloads: i64,
    pub audit: i64,
}

impl Counts {
    /// The same counts with `n` more audit rows.
    pub fn audited(self, n: i64) -> Counts {
        Counts {
            audit: self.audit + n,
            ..self
        }
    }
}

pub async fn counts(pool: &PgPool) -> Counts {
    let (streams, identities, payloads, audit): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM wharf.inbox_streams),
                (SELECT count(*) FROM wharf.inbox_identities),
                (SELECT count(*) FROM wharf.inbox_payloads),
                (SELECT count(*) FROM wharf.inbox_audit)",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    Counts {
        streams,
        identities,
        payloads,
        audit,
    }
}

/// The last audit row: (outcome, reason, event id digest, sequence).
pub async fn last_audit(pool: &PgPool) -> (String, String, Option<String>, Option<String>) {
    sqlx::query_as(
        "SELECT outcome, reason, event_id_sha256, producer_sequence::text
           FROM wharf.inbox_audit ORDER BY audit_id DESC LIMIT 1",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The batch body `{"envelopes": [ … ]}` of these wire bodies, each kept byte for byte.
pub fn batch_body(bodies: &[Vec<u8>]) -> Vec<u8> {
    let raws: Vec<Box<RawValue>> = bodies
        .iter()
        .map(|b| RawValue::from_string(String::from_utf8(b.clone()).unwrap()).unwrap())
        .collect();
    serde_json::to_vec(&json!({ "envelopes": raws })).unwrap()
}

/// Replaces a JSON member of a wire body and returns the new body (no re-signing).
pub fn edit(body: &[u8], f: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut value: Value = serde_json::from_slice(body).unwrap();
    f(&mut value);
    serde_json::to_vec(&value).unwrap()
}
