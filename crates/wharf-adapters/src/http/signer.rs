//! Webhook signatures in the Standard Webhooks asymmetric form (`v1a`, Ed25519).
//!
//! Owns: the signed content (`{webhook-id}.{webhook-timestamp}.{body}`), the header value
//! (`v1a,<base64 signature>`, several space-separated during a key rotation), the key source a
//! deployment injects ([`WebhookSigner`]) with an in-memory implementation, and the receiver's
//! check ([`verify_webhook`]). Must not know: HTTP clients, the outbox, or where keys are
//! stored — that is the deployment's [`WebhookSigner`].
//!
//! # How a receiver verifies
//!
//! The deployment publishes its public key as `whpk_<base64 of the 32-byte key>`
//! ([`public_key_whpk`]). For each request the receiver:
//!
//! 1. reads `webhook-id`, `webhook-timestamp` (unix seconds) and `webhook-signature`;
//! 2. refuses a timestamp more than a few minutes from its own clock (replay window; five
//!    minutes is customary);
//! 3. builds `{webhook-id}.{webhook-timestamp}.{raw body bytes}` — the body exactly as received,
//!    never re-serialised;
//! 4. accepts when any space-separated `v1a,<base64>` entry is a valid Ed25519 signature of that
//!    content under the public key (strict verification);
//! 5. deduplicates by `webhook-id`: it is the action's idempotency key and stays the same on
//!    every retry, while the timestamp and signature change.
//!
//! [`verify_webhook`] does steps 2–4. Any Standard Webhooks library with `v1a` support does the
//! same.

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};

/// The most signatures one request carries (one per key during a rotation). More would mean a
/// rotation that never finished.
pub const SIGNATURES_MAX: usize = 4;

/// The version tag of the asymmetric (Ed25519) scheme of Standard Webhooks.
pub const SIGNATURE_VERSION: &str = "v1a";

/// Which action a signature is for, so a key source can keep one key per tenant. Neither field
/// is secret; a key source must not log the content it signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignScope<'a> {
    /// The action's tenant; `None` for an instance-level action.
    pub tenant_id: Option<&'a str>,
    /// The action's project, when it has one.
    pub project_id: Option<&'a str>,
}

/// Why a key source could not sign.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignerError {
    /// The key source is unreachable or failed (a KMS outage, a locked keystore). Nothing was
    /// sent; a retry may help. The webhook adapter answers Retry `signer_unavailable`.
    #[error("the webhook key source is unavailable: {0}")]
    Unavailable(String),
    /// No key is configured for the scope. Nothing was sent; retrying cannot help until an
    /// operator adds one. The webhook adapter answers Failed `signing_key_missing`.
    #[error("no webhook signing key for this scope")]
    NoKey,
}

/// The webhook key source a deployment provides. It returns one signature per active key
/// (usually one; two while rotating), at most [`SIGNATURES_MAX`] are sent.
///
/// Private keys never leave the source: it receives the content and returns signatures, so it
/// can live in a KMS or HSM.
#[async_trait]
pub trait WebhookSigner: Send + Sync {
    /// Signs `content` (the Standard Webhooks signed content) for an action in `scope`.
    async fn sign(
        &self,
        scope: SignScope<'_>,
        content: &[u8],
    ) -> Result<Vec<Signature>, SignerError>;
}

/// Keys held in memory: one list for every scope, optionally overridden per tenant.
///
/// ```
/// use wharf_adapters::http::{InMemoryWebhookSigner, public_key_whpk};
/// let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
/// let signer = InMemoryWebhookSigner::new(key.clone());
/// println!("publish {}", public_key_whpk(&key.verifying_key()));
/// ```
#[derive(Clone)]
pub struct InMemoryWebhookSigner {
    keys: Vec<SigningKey>,
    tenants: Vec<(String, Vec<SigningKey>)>,
}

impl std::fmt::Debug for InMemoryWebhookSigner {
    // Public keys only: a debug print must never carry a private key into a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let public = |keys: &[SigningKey]| -> Vec<String> {
            keys.iter()
                .map(|k| public_key_whpk(&k.verifying_key()))
                .collect()
        };
        f.debug_struct("InMemoryWebhookSigner")
            .field("keys", &public(&self.keys))
            .field(
                "tenants",
                &self
                    .tenants
                    .iter()
                    .map(|(t, k)| (t, public(k)))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl InMemoryWebhookSigner {
    /// Signs every scope with `key`.
    pub fn new(key: SigningKey) -> InMemoryWebhookSigner {
        InMemoryWebhookSigner {
            keys: vec![key],
            tenants: Vec::new(),
        }
    }

    /// A signer with no default key: only tenants added with [`Self::with_tenant_key`] can
    /// sign; other scopes get [`SignerError::NoKey`].
    pub fn per_tenant() -> InMemoryWebhookSigner {
        InMemoryWebhookSigner {
            keys: Vec::new(),
            tenants: Vec::new(),
        }
    }

    /// Also signs every default-scope request with `key`: during a rotation both keys sign, so
    /// receivers that know either one accept. Keys beyond [`SIGNATURES_MAX`] are ignored.
    pub fn also_sign_with(mut self, key: SigningKey) -> InMemoryWebhookSigner {
        self.keys.push(key);
        self
    }

    /// Signs actions of `tenant_id` with `key` instead of the default keys (call again with the
    /// same tenant to add a rotation key).
    pub fn with_tenant_key(
        mut self,
        tenant_id: impl Into<String>,
        key: SigningKey,
    ) -> InMemoryWebhookSigner {
        let tenant_id = tenant_id.into();
        match self.tenants.iter_mut().find(|(t, _)| *t == tenant_id) {
            Some((_, keys)) => keys.push(key),
            None => self.tenants.push((tenant_id, vec![key])),
        }
        self
    }
}

#[async_trait]
impl WebhookSigner for InMemoryWebhookSigner {
    async fn sign(
        &self,
        scope: SignScope<'_>,
        content: &[u8],
    ) -> Result<Vec<Signature>, SignerError> {
        let keys = scope
            .tenant_id
            .and_then(|t| self.tenants.iter().find(|(id, _)| id == t))
            .map_or(&self.keys, |(_, keys)| keys);
        if keys.is_empty() {
            return Err(SignerError::NoKey);
        }
        Ok(keys
            .iter()
            .take(SIGNATURES_MAX)
            .map(|k| k.sign(content))
            .collect())
    }
}

/// The Standard Webhooks signed content: `{id}.{timestamp}.{body}`.
pub fn signed_content(id: &str, timestamp: i64, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(id.len() + body.len() + 24);
    out.extend_from_slice(id.as_bytes());
    out.push(b'.');
    out.extend_from_slice(timestamp.to_string().as_bytes());
    out.push(b'.');
    out.extend_from_slice(body);
    out
}

/// The `webhook-signature` header value: `v1a,<base64>` entries separated by spaces.
pub fn signature_header(signatures: &[Signature]) -> String {
    signatures
        .iter()
        .take(SIGNATURES_MAX)
        .map(|s| format!("{SIGNATURE_VERSION},{}", BASE64.encode(s.to_bytes())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A public key in the Standard Webhooks form receivers configure: `whpk_<base64>`.
pub fn public_key_whpk(key: &VerifyingKey) -> String {
    format!("whpk_{}", BASE64.encode(key.as_bytes()))
}

/// Reads a `whpk_<base64>` public key (the prefix is optional).
pub fn parse_public_key_whpk(text: &str) -> Option<VerifyingKey> {
    let b64 = text.trim().strip_prefix("whpk_").unwrap_or(text.trim());
    let bytes: [u8; 32] = BASE64.decode(b64).ok()?.try_into().ok()?;
    VerifyingKey::from_bytes(&bytes).ok()
}

/// Why a receiver refused a webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookVerifyError {
    /// `webhook-timestamp` is not a unix time in seconds.
    #[error("webhook-timestamp is not a unix time")]
    BadTimestamp,
    /// The timestamp is further from the receiver's clock than the tolerance (a replay, or a
    /// badly wrong clock).
    #[error("webhook-timestamp is outside the tolerance")]
    StaleTimestamp,
    /// No `v1a` entry verifies under the key.
    #[error("no valid v1a signature")]
    BadSignature,
}

/// A receiver's check of one request: the timestamp is within `tolerance_s` of `now_unix_s`,
/// and some `v1a` entry of `signature_header` is a strict Ed25519 signature of
/// `{id}.{timestamp}.{body}` under `key`.
pub fn verify_webhook(
    key: &VerifyingKey,
    id: &str,
    timestamp: &str,
    body: &[u8],
    signature_header: &str,
    now_unix_s: i64,
    tolerance_s: i64,
) -> Result<(), WebhookVerifyError> {
    if timestamp.is_empty()
        || timestamp.len() > 19
        || !timestamp.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(WebhookVerifyError::BadTimestamp);
    }
    let ts: i64 = timestamp
        .parse()
        .map_err(|_| WebhookVerifyError::BadTimestamp)?;
    if (now_unix_s - ts).abs() > tolerance_s {
        return Err(WebhookVerifyError::StaleTimestamp);
    }
    let content = signed_content(id, ts, body);
    let verified = signature_header
        .split(' ')
        .take(SIGNATURES_MAX * 4)
        .filter_map(|entry| entry.strip_prefix("v1a,"))
        .filter_map(|b64| BASE64.decode(b64).ok())
        .filter_map(|bytes| Signature::from_slice(&bytes).ok())
        .any(|sig| key.verify_strict(&content, &sig).is_ok());
    if verified {
        Ok(())
    } else {
        Err(WebhookVerifyError::BadSignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn sign_now(signer: &InMemoryWebhookSigner, tenant: Option<&str>, content: &[u8]) -> String {
        let scope = SignScope {
            tenant_id: tenant,
            project_id: None,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        signature_header(&rt.block_on(signer.sign(scope, content)).unwrap())
    }

    #[test]
    fn signs_and_verifies_in_the_standard_webhooks_form() {
        let signer = InMemoryWebhookSigner::new(key(1));
        let body = br#"{"a":1}"#;
        let header = sign_now(&signer, None, &signed_content("msg_1", 1_700_000_000, body));
        assert!(header.starts_with("v1a,"));
        let public = parse_public_key_whpk(&public_key_whpk(&key(1).verifying_key())).unwrap();
        let verify = |id: &str, ts: &str, body: &[u8], now: i64| {
            verify_webhook(&public, id, ts, body, &header, now, 300)
        };
        assert_eq!(verify("msg_1", "1700000000", body, 1_700_000_100), Ok(()));
        assert_eq!(
            verify("msg_2", "1700000000", body, 1_700_000_100),
            Err(WebhookVerifyError::BadSignature)
        );
        assert_eq!(
            verify("msg_1", "1700000000", b"{\"a\":2}", 1_700_000_100),
            Err(WebhookVerifyError::BadSignature)
        );
        assert_eq!(
            verify("msg_1", "1700000000", body, 1_700_001_000),
            Err(WebhookVerifyError::StaleTimestamp)
        );
        assert_eq!(
            verify("msg_1", "-1", body, 0),
            Err(WebhookVerifyError::BadTimestamp)
        );
    }

    #[test]
    fn rotation_and_tenants() {
        let signer = InMemoryWebhookSigner::new(key(1))
            .also_sign_with(key(2))
            .with_tenant_key("t1", key(3));
        let content = signed_content("id", 5, b"x");
        let both = sign_now(&signer, Some("other"), &content);
        assert_eq!(both.split(' ').count(), 2);
        for k in [1, 2] {
            let public = key(k).verifying_key();
            verify_webhook(&public, "id", "5", b"x", &both, 5, 0).unwrap();
        }
        let t1 = sign_now(&signer, Some("t1"), &content);
        verify_webhook(&key(3).verifying_key(), "id", "5", b"x", &t1, 5, 0).unwrap();
        assert!(verify_webhook(&key(1).verifying_key(), "id", "5", b"x", &t1, 5, 0).is_err());

        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let none = InMemoryWebhookSigner::per_tenant();
        let scope = SignScope {
            tenant_id: Some("t9"),
            project_id: None,
        };
        assert!(matches!(
            rt.block_on(none.sign(scope, b"x")),
            Err(SignerError::NoKey)
        ));
        assert!(!format!("{signer:?}").contains("secret"));
    }
}
