//! What an application asks for, and the pure checks and digest applied before anything is
//! written (SPEC §2.1).
//!
//! Owns: [`ActionRequest`], its bounds, the canonical payload text and the content digest. Must
//! not know: SQL or the executor. Everything here is a plain function of its inputs, so every
//! bound is tested at its edge without a database.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::error::Error;
use super::kind::{ATTEMPTS_MAX, Registry};
use crate::store::outbox::NewActionRow;

/// Longest idempotency key, in bytes (and at least one).
pub const IDEMPOTENCY_KEY_BYTES_MAX: usize = 256;
/// Longest lane key, in bytes (and at least one).
pub const LANE_KEY_BYTES_MAX: usize = 256;
/// Longest tenant, project and subject account id, in bytes (and at least one when present).
pub const SCOPE_BYTES_MAX: usize = 256;
/// Deepest payload nesting. Payloads carry identifiers; 32 levels is far more than that needs
/// and keeps the recursive canonical writer's stack small.
pub const PAYLOAD_DEPTH_MAX: usize = 32;

/// One effect to record. Build it with [`ActionRequest::new`] and set the optional fields.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRequest {
    /// A registered kind.
    pub kind: String,
    /// The tenant; required unless the kind is instance-level.
    pub tenant_id: Option<String>,
    /// The project within the tenant, if any.
    pub project_id: Option<String>,
    /// Actions with the same lane key never run at the same time, and run in id order. Use one
    /// key per target; enqueue under the target's lock when order matters.
    pub lane_key: String,
    /// The effect's natural key: a second enqueue with the same key and content returns the
    /// first action and changes nothing.
    pub idempotency_key: String,
    /// What the adapter needs; prefer identifiers. At most the registry's payload bound.
    pub payload: Value,
    /// The account the effect addresses; erasing it deletes the action.
    pub subject_account_id: Option<String>,
    /// Attempts before FAILED / `ATTEMPTS_EXHAUSTED`; the kind's default when `None`.
    pub max_attempts: Option<u32>,
    /// An action not started by then ends CANCELLED / `EXPIRED`.
    pub expires_at: Option<DateTime<Utc>>,
    /// Not due before (the database clock at insert when `None`).
    pub run_at: Option<DateTime<Utc>>,
    /// Starts PROPOSED and needs [`admit`](super::admit) or [`refuse`](super::refuse).
    pub proposed: bool,
}

impl ActionRequest {
    /// A request with the required fields; every optional field unset.
    pub fn new(
        kind: impl Into<String>,
        lane_key: impl Into<String>,
        idempotency_key: impl Into<String>,
        payload: Value,
    ) -> ActionRequest {
        ActionRequest {
            kind: kind.into(),
            tenant_id: None,
            project_id: None,
            lane_key: lane_key.into(),
            idempotency_key: idempotency_key.into(),
            payload,
            subject_account_id: None,
            max_attempts: None,
            expires_at: None,
            run_at: None,
            proposed: false,
        }
    }

    /// Sets the tenant.
    pub fn tenant(mut self, tenant_id: impl Into<String>) -> ActionRequest {
        self.tenant_id = Some(tenant_id.into());
        self
    }

    /// Sets the subject account.
    pub fn subject(mut self, account_id: impl Into<String>) -> ActionRequest {
        self.subject_account_id = Some(account_id.into());
        self
    }
}

fn bounded(field: &'static str, value: &str, max: usize) -> Result<(), Error> {
    if value.is_empty() || value.len() > max {
        return Err(Error::Invalid {
            field,
            rule: format!("must be 1..={max} bytes, is {}", value.len()),
        });
    }
    nul_free(field, value)
}

/// What a NUL refusal says: PostgreSQL's `text` and `jsonb` cannot hold U+0000, so the insert
/// would fail on every retry. Refused here, before any SQL, as the bad input it is.
const NUL_RULE: &str = "must not contain U+0000 (NUL), which PostgreSQL cannot store";

fn nul_free(field: &'static str, value: &str) -> Result<(), Error> {
    if value.contains('\0') {
        return Err(Error::Invalid {
            field,
            rule: NUL_RULE.to_owned(),
        });
    }
    Ok(())
}

/// Bytes of a JSON pointer a NUL refusal names; a longer one is cut (keys are the caller's).
const POINTER_BYTES_MAX: usize = 128;

/// Refuses a NUL in any string of the payload, key or value, naming where (as a JSON pointer).
/// Runs after the canonical writer, which bounds the depth this recursion can reach.
fn payload_nul_free(value: &Value, pointer: &mut String) -> Result<(), Error> {
    let refuse = |pointer: &str, what: &str| {
        let mut at = pointer.to_owned();
        if at.len() > POINTER_BYTES_MAX {
            let mut cut = POINTER_BYTES_MAX;
            while !at.is_char_boundary(cut) {
                cut -= 1;
            }
            at.truncate(cut);
            at.push('…');
        }
        let at = if at.is_empty() { "/".to_owned() } else { at };
        Err(Error::Invalid {
            field: "payload",
            rule: format!("{NUL_RULE}; found in the {what} at {at}"),
        })
    };
    match value {
        Value::String(s) if s.contains('\0') => refuse(pointer, "string"),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                payload_nul_free(item, pointer)?;
                pointer.truncate(len);
            }
            Ok(())
        }
        Value::Object(map) => {
            for (key, item) in map {
                let len = pointer.len();
                pointer.push('/');
                // A NUL in the pointer itself is written as its escape, so the refusal holds none.
                pointer.push_str(
                    &key.replace('~', "~0")
                        .replace('/', "~1")
                        .replace('\0', "\\u0000"),
                );
                if key.contains('\0') {
                    return refuse(pointer, "key");
                }
                payload_nul_free(item, pointer)?;
                pointer.truncate(len);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Checks every field of SPEC §2.1 and decides the row to insert. Nothing is written here.
pub(crate) fn prepare(registry: &Registry, req: &ActionRequest) -> Result<NewActionRow, Error> {
    let registered = registry
        .get(&req.kind)
        .ok_or_else(|| Error::UnknownKind(req.kind.clone()))?;
    let spec = &registered.spec;
    match &req.tenant_id {
        Some(t) => bounded("tenant_id", t, SCOPE_BYTES_MAX)?,
        None if !spec.instance_level => {
            return Err(Error::Invalid {
                field: "tenant_id",
                rule: format!(
                    "kind {} is not instance-level: a tenant is required",
                    spec.name
                ),
            });
        }
        None => {}
    }
    if let Some(p) = &req.project_id {
        bounded("project_id", p, SCOPE_BYTES_MAX)?;
    }
    if let Some(s) = &req.subject_account_id {
        bounded("subject_account_id", s, SCOPE_BYTES_MAX)?;
    }
    bounded("lane_key", &req.lane_key, LANE_KEY_BYTES_MAX)?;
    bounded(
        "idempotency_key",
        &req.idempotency_key,
        IDEMPOTENCY_KEY_BYTES_MAX,
    )?;
    let max_attempts = req.max_attempts.unwrap_or(spec.max_attempts_default);
    if !(1..=ATTEMPTS_MAX).contains(&max_attempts) {
        return Err(Error::Invalid {
            field: "max_attempts",
            rule: format!("must be 1..={ATTEMPTS_MAX}, is {max_attempts}"),
        });
    }
    if let (Some(run_at), Some(expires_at)) = (req.run_at, req.expires_at)
        && expires_at <= run_at
    {
        return Err(Error::Invalid {
            field: "expires_at",
            rule: "must be after run_at, or the action could never run".to_owned(),
        });
    }
    let canonical = canonical_payload(&req.payload)?;
    payload_nul_free(&req.payload, &mut String::new())?;
    if canonical.len() > registry.payload_bytes_max() {
        return Err(Error::Invalid {
            field: "payload",
            rule: format!(
                "must be at most {} bytes of canonical JSON, is {}",
                registry.payload_bytes_max(),
                canonical.len()
            ),
        });
    }
    registered
        .adapter
        .validate(&req.payload)
        .map_err(|reason| Error::PayloadRefused {
            kind: spec.name.to_owned(),
            reason,
        })?;
    Ok(NewActionRow {
        kind: spec.name.to_owned(),
        tenant_id: req.tenant_id.clone(),
        project_id: req.project_id.clone(),
        lane_key: req.lane_key.clone(),
        idempotency_key: req.idempotency_key.clone(),
        content_digest: content_digest(req, &canonical).to_vec(),
        at_most_once: spec.at_most_once,
        instance_level: spec.instance_level,
        state: if req.proposed { "PROPOSED" } else { "ADMITTED" },
        max_attempts: max_attempts as i32,
        payload: req.payload.clone(),
        subject_account_id: req.subject_account_id.clone(),
        run_at: req.run_at,
        expires_at: req.expires_at,
    })
}

/// The payload as canonical JSON text: object keys sorted by bytes, no whitespace, scalars as
/// `serde_json` writes them. Independent of map ordering features, so the same value always gives
/// the same bytes (and the same digest) in every build.
pub fn canonical_payload(payload: &Value) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    write_canonical(&mut out, payload, 0)?;
    Ok(out)
}

fn write_canonical(out: &mut Vec<u8>, value: &Value, depth: usize) -> Result<(), Error> {
    if depth > PAYLOAD_DEPTH_MAX {
        return Err(Error::Invalid {
            field: "payload",
            rule: format!("must nest at most {PAYLOAD_DEPTH_MAX} levels"),
        });
    }
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(out, &Value::String(key.clone()));
                out.push(b':');
                write_canonical(out, &map[key], depth + 1)?;
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(out, item, depth + 1)?;
            }
            out.push(b']');
        }
        scalar => write_scalar(out, scalar),
    }
    Ok(())
}

fn write_scalar(out: &mut Vec<u8>, scalar: &Value) {
    // Writing a scalar Value into a Vec cannot fail.
    serde_json::to_writer(&mut *out, scalar).expect("a JSON scalar serializes");
}

/// SHA-256 over kind, scope, lane, canonical payload and subject (SPEC §2.1's "content"), each
/// field tagged and length-prefixed so no two different contents share an encoding.
pub fn content_digest(req: &ActionRequest, canonical_payload: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"wharf.action.content.v1");
    let mut field = |present: Option<&[u8]>| match present {
        None => h.update([0u8]),
        Some(bytes) => {
            h.update([1u8]);
            h.update((bytes.len() as u64).to_be_bytes());
            h.update(bytes);
        }
    };
    field(Some(req.kind.as_bytes()));
    field(req.tenant_id.as_deref().map(str::as_bytes));
    field(req.project_id.as_deref().map(str::as_bytes));
    field(Some(req.lane_key.as_bytes()));
    field(Some(canonical_payload));
    field(req.subject_account_id.as_deref().map(str::as_bytes));
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_text_sorts_keys_and_drops_whitespace() {
        let check = |v: Value, text: &str| {
            assert_eq!(
                String::from_utf8(canonical_payload(&v).unwrap()).unwrap(),
                text
            )
        };
        check(
            json!({"b": 1, "a": [true, null, "x"]}),
            r#"{"a":[true,null,"x"],"b":1}"#,
        );
        check(json!({"é": 1.5, "e": "\n"}), r#"{"e":"\n","é":1.5}"#);
        check(json!("plain"), r#""plain""#);
        check(json!({}), "{}");
    }

    #[test]
    fn depth_is_bounded() {
        let mut v = json!(1);
        for _ in 0..PAYLOAD_DEPTH_MAX {
            v = json!([v]);
        }
        assert!(canonical_payload(&v).is_ok());
        v = json!([v]);
        assert!(canonical_payload(&v).is_err());
    }

    #[test]
    fn a_nul_anywhere_is_refused_naming_the_field() {
        use crate::outbox::{Adapter, Attempt, Backoff, KindSpec, Outcome};

        struct Noop;
        #[async_trait::async_trait]
        impl Adapter for Noop {
            fn spec(&self) -> KindSpec {
                KindSpec {
                    name: "noop",
                    at_most_once: false,
                    instance_level: false,
                    max_attempts_default: 3,
                    backoff: Backoff::default(),
                    call_timeout_ms: 1_000,
                }
            }
            async fn execute(&self, _attempt: &mut Attempt) -> Outcome {
                Outcome::Done { readback_ref: None }
            }
        }
        let mut registry = Registry::new();
        registry.register(std::sync::Arc::new(Noop)).unwrap();
        let base =
            ActionRequest::new("noop", "lane", "key", json!({"a": ["x", {"b": "y"}]})).tenant("t");
        assert!(prepare(&registry, &base).is_ok());
        type Change = Box<dyn Fn(&mut ActionRequest)>;
        let rows: Vec<(&str, Change, &str)> = vec![
            (
                "idempotency_key",
                Box::new(|r| r.idempotency_key = "k\0x".into()),
                "",
            ),
            ("lane_key", Box::new(|r| r.lane_key = "\0".into()), ""),
            (
                "tenant_id",
                Box::new(|r| r.tenant_id = Some("t\0".into())),
                "",
            ),
            (
                "project_id",
                Box::new(|r| r.project_id = Some("\0p".into())),
                "",
            ),
            (
                "subject_account_id",
                Box::new(|r| r.subject_account_id = Some("a\0".into())),
                "",
            ),
            (
                "payload",
                Box::new(|r| r.payload = json!({"a": ["x", {"b": "y\0"}]})),
                "string at /a/1/b",
            ),
            (
                "payload",
                Box::new(|r| r.payload = json!({"a/~\0": 1})),
                "key at /a~1~0\\u0000",
            ),
            (
                "payload",
                Box::new(|r| r.payload = json!("\0")),
                "string at /",
            ),
        ];
        for (field, change, at) in rows {
            let mut r = base.clone();
            change(&mut r);
            match prepare(&registry, &r) {
                Err(Error::Invalid { field: f, rule }) => {
                    assert_eq!(f, field, "{r:?}");
                    assert!(rule.contains("U+0000"), "{rule}");
                    assert!(rule.contains(at), "{rule} should name {at}");
                }
                other => panic!("{r:?}: {other:?}"),
            }
        }
        let mut deep = base.clone();
        deep.payload = json!({ "k".repeat(300): "\0" });
        match prepare(&registry, &deep) {
            Err(Error::Invalid { rule, .. }) => {
                assert!(rule.len() < 300, "the pointer is cut: {rule}");
                assert!(rule.ends_with('…'), "{rule}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn digest_covers_each_content_field_and_nothing_else() {
        let base = ActionRequest::new("k", "lane", "key", json!({"a": 1})).tenant("t");
        let d = |r: &ActionRequest| content_digest(r, &canonical_payload(&r.payload).unwrap());
        let same = d(&base);
        let mut other = base.clone();
        other.max_attempts = Some(9);
        other.run_at = Some(Utc::now());
        other.idempotency_key = "another".into();
        assert_eq!(
            d(&other),
            same,
            "not content: attempts, timing, the key itself"
        );
        type Change = Box<dyn Fn(&mut ActionRequest)>;
        let changes: Vec<Change> = vec![
            Box::new(|r| r.kind = "k2".into()),
            Box::new(|r| r.tenant_id = None),
            Box::new(|r| r.project_id = Some("p".into())),
            Box::new(|r| r.lane_key = "lane2".into()),
            Box::new(|r| r.payload = json!({"a": 2})),
            Box::new(|r| r.subject_account_id = Some("s".into())),
            // Length prefixes: moving bytes between fields changes the digest.
            Box::new(|r| {
                r.kind = "kl".into();
                r.lane_key = "ane".into()
            }),
        ];
        for change in changes {
            let mut r = base.clone();
            change(&mut r);
            assert_ne!(d(&r), same, "{r:?}");
        }
    }
}
