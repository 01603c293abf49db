//! The `webhook` kind: an HTTP POST of the payload's JSON body to its URL, signed in the
//! Standard Webhooks asymmetric form.
//!
//! Owns: the payload (`{url, body, dedupe?}`) and its enqueue-time checks, the request headers
//! (`webhook-id` = the action's idempotency key, `webhook-timestamp`, `webhook-signature:
//! v1a,…`), the optional endpoint check that cancels deliveries to disabled endpoints, and the
//! kind's spec. Must not know: sockets, redirects, timeouts or status codes (the sender and
//! `classify` own those), or where signing keys live (the [`WebhookSigner`]).
//!
//! # Duplicates
//!
//! `webhook` is not at-most-once (a lost lease before the fence is simply claimed again), but a
//! webhook receiver cannot be read back. So an ambiguous failure — a timeout or reset after the
//! request was sent, or a new claim that finds an earlier attempt's fence passed with no result
//! — ends UNCERTAIN and nothing sends it again. Only when the receiver deduplicates by
//! `webhook-id` (the payload says `"dedupe": true`, or the endpoint is listed in
//! `[http] dedupe_endpoints`) is such a failure retried: the `webhook-id` is the same on every
//! attempt, so the receiver keeps one copy.
//!
//! # Enqueue
//!
//! ```
//! # use wharf_adapters::http::WebhookPayload;
//! let payload = WebhookPayload::new("https://hooks.example.com/in", serde_json::json!({"order": 42}));
//! let request = wharf::outbox::ActionRequest::new(
//!     wharf_adapters::http::WEBHOOK_KIND,
//!     "webhook:hooks.example.com",
//!     "order-42-paid",
//!     payload.to_value(),
//! );
//! ```

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wharf::outbox::{Adapter, Attempt, Backoff, ErrorCode, KindSpec, Outcome};

use super::deliver::fenced_post;
use super::sender::NetworkSender;
use super::sender::literal_ip;
use super::signer::{SignScope, SignerError, WebhookSigner, signature_header, signed_content};

/// The kind's name.
pub const WEBHOOK_KIND: &str = "webhook";

/// The longest URL, in bytes. Common servers and proxies refuse request lines beyond 8 KiB;
/// a webhook URL longer than 2 KiB is a payload smuggled into a query string.
pub const URL_BYTES_MAX: usize = 2_048;

/// Attempts by default: with [`webhook_backoff`] the last is about 5½ hours after the first, so
/// a receiver can be down for a deploy, a night-time maintenance or an incident, and still
/// receive every event before it becomes a dead letter.
pub const WEBHOOK_ATTEMPTS_DEFAULT: u32 = 15;

/// Retries start at 5 s and double up to an hour (±20 % jitter, so a fleet of senders does not
/// hammer a recovering receiver in lockstep).
pub fn webhook_backoff() -> Backoff {
    Backoff {
        base_ms: 5_000,
        factor: 2,
        cap_ms: 60 * 60 * 1_000,
        jitter_percent: 20,
    }
}

/// Diagnostic codes of the webhook kind (beyond the sender's).
pub mod webhook_code {
    /// The stored payload no longer parses (it passed enqueue, so the schema changed).
    pub const PAYLOAD_INVALID: &str = "payload_invalid";
    /// A claim found an earlier attempt past its fence with no recorded result, and the
    /// receiver does not deduplicate: sending again could deliver twice.
    pub const EARLIER_ATTEMPT_AMBIGUOUS: &str = "earlier_attempt_ambiguous";
    /// The idempotency key cannot be sent as a header (control characters).
    pub const WEBHOOK_ID_INVALID: &str = "webhook_id_invalid";
    /// The key source failed; nothing was sent.
    pub const SIGNER_UNAVAILABLE: &str = "signer_unavailable";
    /// No signing key for the action's scope.
    pub const SIGNING_KEY_MISSING: &str = "signing_key_missing";
    /// The endpoint check says the endpoint is disabled.
    pub const ENDPOINT_DISABLED: &str = "endpoint_disabled";
    /// The endpoint check failed; nothing was sent.
    pub const ENDPOINT_CHECK_FAILED: &str = "endpoint_check_failed";
}

/// The `webhook` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookPayload {
    /// Where to POST: an absolute `http` or `https` URL, at most [`URL_BYTES_MAX`] bytes,
    /// with no user name or password (they would be stored and shown with the action).
    pub url: String,
    /// The JSON body, sent as `application/json`.
    pub body: Value,
    /// The receiver deduplicates by `webhook-id`, so an ambiguous failure may be retried.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dedupe: bool,
}

impl WebhookPayload {
    /// A payload for a receiver that does not deduplicate.
    pub fn new(url: impl Into<String>, body: Value) -> WebhookPayload {
        WebhookPayload {
            url: url.into(),
            body,
            dedupe: false,
        }
    }

    /// Marks the receiver as deduplicating by `webhook-id`.
    pub fn deduplicating(mut self) -> WebhookPayload {
        self.dedupe = true;
        self
    }

    /// The payload as the JSON an `ActionRequest` carries.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a WebhookPayload always serialises")
    }
}

/// Whether an endpoint may still receive deliveries, asked before every attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointStatus {
    /// Deliver.
    Enabled,
    /// Do not deliver: the action ends CANCELLED / `endpoint_disabled`.
    Disabled,
}

/// A deployment's view of its webhook endpoints (subscriptions switched off, endpoints removed).
/// Optional: without one every endpoint is enabled. Asked before every attempt, so an endpoint
/// disabled while its deliveries wait gets none of them.
#[async_trait]
pub trait WebhookEndpoints: Send + Sync {
    /// The endpoint's status for an action in `scope`. An `Err` (a short, payload-free reason)
    /// means the deployment could not tell: the attempt is retried, nothing is sent.
    async fn status(&self, scope: SignScope<'_>, url: &Url) -> Result<EndpointStatus, String>;
}

/// The `webhook` kind's adapter.
pub struct WebhookAdapter {
    sender: NetworkSender,
    signer: Arc<dyn WebhookSigner>,
    endpoints: Option<Arc<dyn WebhookEndpoints>>,
}

impl std::fmt::Debug for WebhookAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookAdapter")
            .field("sender", &self.sender)
            .finish_non_exhaustive()
    }
}

impl WebhookAdapter {
    /// The adapter on `sender`, signing with `signer`.
    pub fn new(sender: NetworkSender, signer: Arc<dyn WebhookSigner>) -> WebhookAdapter {
        WebhookAdapter {
            sender,
            signer,
            endpoints: None,
        }
    }

    /// Checks every attempt's endpoint with `endpoints` first.
    pub fn with_endpoints(mut self, endpoints: Arc<dyn WebhookEndpoints>) -> WebhookAdapter {
        self.endpoints = Some(endpoints);
        self
    }

    fn parse(&self, payload: &Value) -> Result<(WebhookPayload, Url), String> {
        let payload = WebhookPayload::deserialize(payload)
            .map_err(|e| format!("expected {{url, body, dedupe?}}: {e}"))?;
        let url = check_url(&payload.url)?;
        if let Some(ip) = url.host_str().and_then(literal_ip) {
            // A literal address can be judged now; a name only when it is resolved.
            self.sender
                .guard()
                .check(ip)
                .map_err(|e| format!("url: {e}"))?;
        }
        Ok((payload, url))
    }
}

/// The URL rules of [`WebhookPayload::url`].
fn check_url(url: &str) -> Result<Url, String> {
    if url.len() > URL_BYTES_MAX {
        return Err(format!("url: at most {URL_BYTES_MAX} bytes"));
    }
    let parsed = Url::parse(url).map_err(|_| "url: not an absolute URL".to_owned())?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("url: must be http or https".to_owned());
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("url: needs a host".to_owned());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("url: must not carry credentials".to_owned());
    }
    Ok(parsed)
}

fn code(c: &'static str) -> ErrorCode {
    ErrorCode::from_static(c)
}

#[async_trait]
impl Adapter for WebhookAdapter {
    fn spec(&self) -> KindSpec {
        KindSpec {
            name: WEBHOOK_KIND,
            at_most_once: false,
            instance_level: false,
            max_attempts_default: WEBHOOK_ATTEMPTS_DEFAULT,
            backoff: webhook_backoff(),
            call_timeout_ms: self.sender.call_timeout_ms(),
        }
    }

    fn validate(&self, payload: &Value) -> Result<(), String> {
        self.parse(payload).map(|_| ())
    }

    /// No: an attempt that finds an earlier write mark ends UNCERTAIN for a receiver that does
    /// not deduplicate, so the mark must mean "the request may have gone out", which only the
    /// fence right before it can say. With the claim as the fence, every holder that died
    /// after its claim left such endings behind (RELIABILITY.md, finding 8).
    fn claim_may_fence(&self) -> bool {
        false
    }

    async fn execute(&self, attempt: &mut Attempt) -> Outcome {
        let started = Instant::now();
        let (payload, url) = match self.parse(attempt.payload()) {
            Ok(parsed) => parsed,
            Err(_) => {
                return Outcome::Failed {
                    code: code(webhook_code::PAYLOAD_INVALID),
                };
            }
        };
        let dedupe = payload.dedupe || self.sender.dedupes(&url);
        if attempt.write_started() && !dedupe {
            return Outcome::Uncertain {
                code: code(webhook_code::EARLIER_ATTEMPT_AMBIGUOUS),
            };
        }
        let scope = SignScope {
            tenant_id: attempt.tenant_id(),
            project_id: attempt.project_id(),
        };
        if let Some(endpoints) = &self.endpoints {
            match endpoints.status(scope, &url).await {
                Ok(EndpointStatus::Enabled) => {}
                Ok(EndpointStatus::Disabled) => {
                    return Outcome::Cancelled {
                        code: code(webhook_code::ENDPOINT_DISABLED),
                    };
                }
                Err(reason) => {
                    tracing::warn!(%reason, "webhook endpoint check failed");
                    return Outcome::Retry {
                        after: None,
                        code: code(webhook_code::ENDPOINT_CHECK_FAILED),
                    };
                }
            }
        }
        let destination = match self.sender.check_destination(&url).await {
            Ok(destination) => destination,
            Err(verdict) => return super::deliver::outcome(verdict),
        };
        let Ok(webhook_id) = HeaderValue::from_str(attempt.idempotency_key()) else {
            return Outcome::Failed {
                code: code(webhook_code::WEBHOOK_ID_INVALID),
            };
        };
        let body = serde_json::to_vec(&payload.body).expect("a JSON value always serialises");
        // The receiver compares this with its own clock; the sender's clock is the right one
        // here (not the database's), since it is the moment of sending.
        let timestamp = chrono::Utc::now().timestamp();
        let content = signed_content(attempt.idempotency_key(), timestamp, &body);
        let signatures = match self.signer.sign(scope, &content).await {
            Ok(signatures) if !signatures.is_empty() => signatures,
            Ok(_) | Err(SignerError::NoKey) => {
                return Outcome::Failed {
                    code: code(webhook_code::SIGNING_KEY_MISSING),
                };
            }
            Err(e) => {
                tracing::warn!(error = %e, "webhook signing failed");
                return Outcome::Retry {
                    after: None,
                    code: code(webhook_code::SIGNER_UNAVAILABLE),
                };
            }
        };
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(HeaderName::from_static("webhook-id"), webhook_id);
        headers.insert(
            HeaderName::from_static("webhook-timestamp"),
            HeaderValue::from(timestamp),
        );
        headers.insert(
            HeaderName::from_static("webhook-signature"),
            HeaderValue::from_str(&signature_header(&signatures))
                .expect("base64 and the v1a tag are visible ASCII"),
        );
        fenced_post(
            &self.sender,
            attempt,
            &destination,
            headers,
            body,
            dedupe,
            started,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::config::HttpSenderConfig;
    use crate::http::signer::InMemoryWebhookSigner;

    fn adapter() -> WebhookAdapter {
        let sender = NetworkSender::new(&HttpSenderConfig::default()).unwrap();
        let signer = InMemoryWebhookSigner::new(ed25519_dalek::SigningKey::from_bytes(&[1; 32]));
        WebhookAdapter::new(sender, Arc::new(signer))
    }

    #[test]
    fn enqueue_checks() {
        let a = adapter();
        let ok = |v: Value| assert_eq!(a.validate(&v), Ok(()), "{v}");
        let bad = |v: Value| assert!(a.validate(&v).is_err(), "{v}");
        ok(serde_json::json!({"url": "https://hooks.example.com/in", "body": {"a": 1}}));
        ok(
            serde_json::json!({"url": "http://hooks.example.com:8080/", "body": [1], "dedupe": true}),
        );
        ok(serde_json::json!({"url": "https://8.8.8.8/", "body": null}));
        bad(serde_json::json!({"url": "ftp://hooks.example.com/", "body": {}}));
        bad(serde_json::json!({"url": "/relative", "body": {}}));
        bad(serde_json::json!({"url": "https://user:pw@hooks.example.com/", "body": {}}));
        bad(serde_json::json!({"url": "https://hooks.example.com/", "body": {}, "extra": 1}));
        bad(serde_json::json!({"body": {}}));
        bad(serde_json::json!({"url": "https://hooks.example.com/"}));
        bad(
            serde_json::json!({"url": format!("https://h.example/{}", "a".repeat(URL_BYTES_MAX)), "body": {}}),
        );
        bad(serde_json::json!({"url": "http://127.0.0.1/", "body": {}}));
        bad(serde_json::json!({"url": "http://[::ffff:10.0.0.1]/", "body": {}}));
        bad(serde_json::json!({"url": "http://169.254.169.254/", "body": {}}));
        bad(serde_json::json!("https://hooks.example.com/"));
    }

    #[test]
    fn spec_fits_the_default_fence_margin() {
        let spec = adapter().spec();
        spec.validate().unwrap();
        assert!(spec.call_timeout_ms < 60_000);
        assert!(!spec.at_most_once);
        let biggest = NetworkSender::new(&HttpSenderConfig {
            connect_timeout_ms: crate::http::CONNECT_TIMEOUT_MS_MAX,
            total_timeout_ms: crate::http::TOTAL_TIMEOUT_MS_MAX,
            ..HttpSenderConfig::default()
        })
        .unwrap();
        assert!(biggest.call_timeout_ms() < 60_000);
    }

    #[test]
    fn payloads_round_trip() {
        let p = WebhookPayload::new("https://x.example/", serde_json::json!({"k": "v"}));
        assert_eq!(
            p.to_value(),
            serde_json::json!({"url": "https://x.example/", "body": {"k": "v"}})
        );
        let d = p.clone().deduplicating();
        assert_eq!(d.to_value()["dedupe"], true);
        assert_eq!(WebhookPayload::deserialize(&d.to_value()).unwrap(), d);
    }
}
