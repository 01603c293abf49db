//! The `envelope` kind: delivers a stored, signed `controlplane/v1` envelope to another wharf's
//! ingest endpoint (`POST /v1/tenants/{t}/projects/{p}/envelopes`, SPEC §3.8 and §4).
//!
//! Owns: the `[envelope]` table (bearer credentials per destination), reading the action's
//! [`EnvelopeDelivery`], answering the outbox's budget hooks from the per-tenant delivery rate
//! limit (before the claim, right after it, and at execution), and reading the
//! receiver's public v1 outcome into a stable code. Must not know: how the envelope was built
//! or signed (`wharf::outbound` did that at emit, and the body is its stored canonical JSON,
//! byte for byte), sockets or status classes (the sender and `classify` own those).
//!
//! # Why ambiguity is a retry here
//!
//! A receiving wharf deduplicates by event id and idempotency key: a second copy of the same
//! envelope answers `ignore-duplicate` (200) and changes nothing. So a timeout or reset after
//! the request was sent, or a claim that finds an earlier attempt's fence passed, is retried,
//! and the duplicate's 200 ends the action DONE.
//!
//! # Receiver answers
//!
//! | answer | action |
//! |---|---|
//! | 200 `accept-delayed`, `accept-reordered`, `ignore-duplicate` | DONE, readback `200 <outcome>` |
//! | 409 `refuse-replay`, 422 `refuse-tampered` / `refuse-incompatible` | FAILED, code = the outcome |
//! | 401, 403, 404, 413, other 4xx | FAILED `http_4xx_<status>` |
//! | 408, 429 (with `Retry-After`), 5xx, connect failures, ambiguous failures | retry |
//!
//! ```toml
//! [envelope]
//! [[envelope.destinations]]
//! url = "https://b.example/v1/tenants/acme/projects/web/envelopes"  # or any prefix of it
//! bearer_token_env = "WHARF_B_TOKEN"    # or bearer_token = "…" (keep the file private)
//! ```
//!
//! # JetStream destinations
//!
//! A destination `nats://host:port/<subject>` is published to that subject with
//! `Nats-Msg-Id` = the event id and the entry's credential as `Authorization: Bearer …` (the
//! receiving wharf's consumer reads it there), through [`wharf_nats::Publisher`]: the stream's
//! publish acknowledgement is DONE (readback `jetstream <stream> <sequence>`). No answer, a
//! lost connection or a missing stream is a retry: the stream deduplicates by message id
//! within its window, and the receiving wharf by event id after it. A message larger than the
//! server accepts is FAILED `jetstream_too_large`. Only configured destinations are reachable
//! (the entry is the allow-list); the HTTP address guard does not apply to NATS servers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::Value;
use wharf::outbound::{DeliveryBudget, ENVELOPE_KIND, EnvelopeDelivery};
use wharf::outbox::{Adapter, Attempt, ClaimBudget, ErrorCode, KindSpec, Outcome};

use super::classify::Verdict;
use super::config::endpoint_covers;
use super::deliver::{outcome, send_fenced};
use super::error::Error;
use super::sender::NetworkSender;
use super::sender::literal_ip;
use super::webhook::webhook_backoff;

/// Attempts by default. A receiver stream is one lane, so while one envelope retries the ones
/// behind it wait, and a dead letter leaves a gap the receiver's cursor cannot pass: keep trying
/// for about ten hours (with the webhook backoff, capped at an hour between attempts) before
/// giving up.
pub const ENVELOPE_ATTEMPTS_DEFAULT: u32 = 20;

/// The most `[[envelope.destinations]]` entries (each delivery scans them).
pub const DESTINATIONS_MAX: usize = 256;

/// The longest bearer token, in bytes. wharf's own credentials are far shorter; this only
/// bounds a header built from configuration.
pub const BEARER_TOKEN_BYTES_MAX: usize = 4_096;

/// Diagnostic codes of the envelope kind (beyond the sender's, and the receiver's own
/// `refuse-replay`, `refuse-tampered`, `refuse-incompatible`).
pub mod envelope_code {
    /// The action's payload is not an [`EnvelopeDelivery`](wharf::outbound::EnvelopeDelivery)
    /// (it was not enqueued by `emit_envelope`).
    pub const PAYLOAD_INVALID: &str = "payload_invalid";
    /// No `[[envelope.destinations]]` entry covers the destination: nothing was sent.
    pub const CREDENTIAL_MISSING: &str = "destination_credential_missing";
    /// A `nats://` destination, and the adapter was built without a JetStream publisher.
    pub const JETSTREAM_MISSING: &str = "jetstream_not_configured";
    /// The NATS server refused the message's size: no retry can help.
    pub const JETSTREAM_TOO_LARGE: &str = "jetstream_too_large";
}

/// The `[envelope]` table of `wharf.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvelopeConfig {
    /// Receivers and their credentials; the entry whose URL covers the destination with the
    /// most path segments wins.
    pub destinations: Vec<EnvelopeDestinationConfig>,
}

/// One receiver: a URL prefix (scheme, host and port equal, path segments leading) and the
/// bearer credential that receiver issued to this server's tenant.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeDestinationConfig {
    /// An absolute http(s) URL: the ingest URL itself, or a prefix of it (e.g. the receiver's
    /// origin).
    pub url: String,
    /// The credential, written in the file. Exactly one of this and `bearer_token_env`.
    #[serde(default)]
    pub bearer_token: Option<String>,
    /// The name of an environment variable holding the credential, read at start-up.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
}

impl std::fmt::Debug for EnvelopeDestinationConfig {
    // Never the token: Debug output ends up in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvelopeDestinationConfig")
            .field("url", &self.url)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "…"))
            .field("bearer_token_env", &self.bearer_token_env)
            .finish()
    }
}

/// A destination prefix and its ready `Authorization` header.
#[derive(Clone)]
struct Credential {
    prefix: Url,
    authorization: HeaderValue,
}

/// The `envelope` kind's adapter.
pub struct EnvelopeAdapter {
    sender: NetworkSender,
    credentials: Arc<Vec<Credential>>,
    budget: Option<Arc<DeliveryBudget>>,
    jetstream: Option<Arc<wharf_nats::Publisher>>,
}

impl std::fmt::Debug for EnvelopeAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvelopeAdapter")
            .field("sender", &self.sender)
            .field(
                "destinations",
                &self
                    .credentials
                    .iter()
                    .map(|c| c.prefix.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("budget", &self.budget)
            .field("jetstream", &self.jetstream.is_some())
            .finish()
    }
}

impl EnvelopeAdapter {
    /// The adapter on `sender`, with the credentials of `config` (environment variables are
    /// read now). Refuses an entry with a bad URL, with no or two token sources, an unset
    /// variable, or a token that cannot be a header.
    pub fn new(sender: NetworkSender, config: &EnvelopeConfig) -> Result<EnvelopeAdapter, Error> {
        let field = "envelope.destinations";
        if config.destinations.len() > DESTINATIONS_MAX {
            return Err(Error::config(
                field,
                format!("at most {DESTINATIONS_MAX} entries"),
            ));
        }
        let credentials = config
            .destinations
            .iter()
            .map(|d| {
                let prefix = Url::parse(&d.url)
                    .ok()
                    .filter(|u| {
                        matches!(u.scheme(), "http" | "https" | "nats") && u.host().is_some()
                    })
                    .ok_or_else(|| {
                        Error::config(field, format!("{:?}: not an http(s) or nats URL", d.url))
                    })?;
                let token = match (&d.bearer_token, &d.bearer_token_env) {
                    (Some(token), None) => token.clone(),
                    (None, Some(var)) => std::env::var(var).map_err(|_| {
                        Error::config(field, format!("{:?}: ${var} is not set", d.url))
                    })?,
                    _ => {
                        return Err(Error::config(
                            field,
                            format!(
                                "{:?}: needs exactly one of bearer_token, bearer_token_env",
                                d.url
                            ),
                        ));
                    }
                };
                let mut authorization = (!token.is_empty() && token.len() <= BEARER_TOKEN_BYTES_MAX)
                    .then(|| HeaderValue::from_str(&format!("Bearer {token}")).ok())
                    .flatten()
                    .ok_or_else(|| {
                        Error::config(
                            field,
                            format!(
                                "{:?}: the token must be 1..={BEARER_TOKEN_BYTES_MAX} bytes of visible ASCII",
                                d.url
                            ),
                        )
                    })?;
                // Keeps the token out of reqwest's and hyper's debug output.
                authorization.set_sensitive(true);
                Ok(Credential {
                    prefix,
                    authorization,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(EnvelopeAdapter {
            sender,
            credentials: Arc::new(credentials),
            budget: None,
            jetstream: None,
        })
    }

    /// Publishes `nats://` destinations with `publisher` (see the module docs).
    pub fn with_jetstream(mut self, publisher: Arc<wharf_nats::Publisher>) -> EnvelopeAdapter {
        self.jetstream = Some(publisher);
        self
    }

    /// Fences, publishes to the subject the URL's path names, and reads the stream's answer.
    async fn publish_jetstream(
        &self,
        attempt: &mut Attempt,
        url: &Url,
        authorization: &HeaderValue,
        event_id: &str,
        body: Vec<u8>,
        started: Instant,
    ) -> Outcome {
        let failed = |c| Outcome::Failed { code: code(c) };
        let Some(publisher) = &self.jetstream else {
            return failed(envelope_code::JETSTREAM_MISSING);
        };
        let (Some(host), Ok(authorization)) = (url.host_str(), authorization.to_str()) else {
            return failed(envelope_code::PAYLOAD_INVALID);
        };
        let server = format!("nats://{host}:{}", url.port().unwrap_or(4222));
        let subject = url.path().trim_start_matches('/');
        if let Err(refused) = attempt.fence().begin_write().await {
            tracing::debug!(%refused, "fence refused; not publishing");
            return Outcome::Abandoned;
        }
        let left = attempt
            .call_timeout()
            .saturating_sub(started.elapsed())
            .saturating_sub(Duration::from_millis(super::CALL_RESERVE_MS));
        let retry = |c: &str| Outcome::Retry {
            after: None,
            code: ErrorCode::new(format!("jetstream_{c}"))
                .unwrap_or(ErrorCode::from_static("jetstream_failed")),
        };
        let headers = [("Authorization", authorization)];
        let published = publisher.publish(&server, subject, event_id, &headers, body);
        match tokio::time::timeout(left, published).await {
            Ok(Ok(p)) => Outcome::Done {
                readback_ref: Some(format!(
                    "jetstream {} {}{}",
                    p.stream,
                    p.sequence,
                    if p.duplicate { " duplicate" } else { "" }
                )),
            },
            Ok(Err(wharf_nats::Error::Publish {
                kind: "too_large", ..
            })) => failed(envelope_code::JETSTREAM_TOO_LARGE),
            Ok(Err(wharf_nats::Error::Publish { kind, .. })) => retry(kind),
            Ok(Err(_)) => retry("connect"),
            // The stream may hold it; a retry under the same message id is deduplicated.
            Err(_) => retry("timeout"),
        }
    }

    /// Applies the per-tenant delivery rate limit (SPEC §3.8), checked before claiming: the
    /// claim takes no row of a tenant without a token (it stays ADMITTED, untouched), and what
    /// it takes is charged at once ([`DeliveryBudget`]'s module docs). A delivery that slipped
    /// past the claim and finds no token answers `Defer` (no attempt counted, nothing sent,
    /// the row back to ADMITTED at once).
    pub fn with_budget(mut self, budget: Arc<DeliveryBudget>) -> EnvelopeAdapter {
        self.budget = Some(budget);
        self
    }

    /// Whether a `[[envelope.destinations]]` entry covers `url`, so that a delivery to it has a
    /// credential. `wharf emit` asks before enqueueing, so a `--to` nobody configured is
    /// refused at once instead of failing later as `destination_credential_missing`.
    pub fn has_credential_for(&self, url: &str) -> bool {
        Url::parse(url).is_ok_and(|u| self.credential(&u).is_some())
    }

    /// The configured destination URL prefixes, for messages.
    pub fn destinations(&self) -> Vec<String> {
        self.credentials
            .iter()
            .map(|c| c.prefix.to_string())
            .collect()
    }

    /// The credential of the most specific destination entry covering `url`.
    fn credential(&self, url: &Url) -> Option<&HeaderValue> {
        self.credentials
            .iter()
            .filter(|c| endpoint_covers(&c.prefix, url))
            .max_by_key(|c| c.prefix.path_segments().map_or(0, |s| s.count()))
            .map(|c| &c.authorization)
    }
}

fn code(c: &'static str) -> ErrorCode {
    ErrorCode::from_static(c)
}

/// The receiver's public v1 outcome in a response body, if it names one of the closed set.
/// Only the outcome term is kept; nothing else of the body is.
pub fn receiver_outcome(body: &[u8]) -> Option<&'static str> {
    const OUTCOMES: [&str; 6] = [
        "accept-delayed",
        "accept-reordered",
        "ignore-duplicate",
        "refuse-replay",
        "refuse-incompatible",
        "refuse-tampered",
    ];
    let value: Value = serde_json::from_slice(body).ok()?;
    ["outcome", "code"].iter().find_map(|field| {
        let said = value.get(field)?.as_str()?;
        OUTCOMES.iter().find(|o| **o == said).copied()
    })
}

#[async_trait]
impl Adapter for EnvelopeAdapter {
    fn spec(&self) -> KindSpec {
        KindSpec {
            name: ENVELOPE_KIND,
            at_most_once: false,
            instance_level: false,
            max_attempts_default: ENVELOPE_ATTEMPTS_DEFAULT,
            backoff: webhook_backoff(),
            call_timeout_ms: self.sender.call_timeout_ms(),
        }
    }

    fn validate(&self, payload: &Value) -> Result<(), String> {
        let delivery = EnvelopeDelivery::from_payload(payload).map_err(|_| {
            "expected {destination_url, envelope} as emit_envelope writes it".to_owned()
        })?;
        // A literal address can be judged now (as the webhook kind does); a name only when it
        // is resolved, at every attempt.
        let url = Url::parse(&delivery.destination_url)
            .map_err(|_| "destination_url: not an absolute URL".to_owned())?;
        if url.scheme() == "nats" {
            // Not a network-guard question: only configured destinations have a credential.
            return Ok(());
        }
        if let Some(ip) = url.host_str().and_then(literal_ip) {
            self.sender
                .guard()
                .check(ip)
                .map_err(|e| format!("destination_url: {e}"))?;
        }
        Ok(())
    }

    fn claim_budget(&self) -> ClaimBudget {
        match &self.budget {
            Some(budget) => budget.claim_budget_at(Instant::now()),
            None => ClaimBudget::Unlimited,
        }
    }

    fn claimed(&self, tenants: &[Option<&str>]) {
        if let Some(budget) = &self.budget {
            budget.charge_claimed_at(tenants, Instant::now());
        }
    }

    async fn execute(&self, attempt: &mut Attempt) -> Outcome {
        let started = Instant::now();
        // First, before anything can end the attempt: the claim reserved one delivery of this
        // tenant for this row, and this takes it whatever follows, so reservations match
        // claimed rows one for one. Without a reservation (the row slipped past the claim) it
        // takes a token, or defers: nothing was sent and the attempt does not count; at least
        // a millisecond, so a rounding to zero cannot make the row spin.
        if let (Some(budget), Some(tenant)) = (&self.budget, attempt.tenant_id())
            && let Err(wait) = budget.start(tenant)
        {
            return Outcome::Defer {
                until: wait.max(Duration::from_millis(1)),
            };
        }
        let failed = |c| Outcome::Failed { code: code(c) };
        let Ok(delivery) = EnvelopeDelivery::from_payload(attempt.payload()) else {
            return failed(envelope_code::PAYLOAD_INVALID);
        };
        let (Ok(url), Ok(body)) = (Url::parse(&delivery.destination_url), delivery.body()) else {
            return failed(envelope_code::PAYLOAD_INVALID);
        };
        let Some(authorization) = self.credential(&url).cloned() else {
            return failed(envelope_code::CREDENTIAL_MISSING);
        };
        if url.scheme() == "nats" {
            let event_id = delivery.envelope.event_id.clone();
            return self
                .publish_jetstream(attempt, &url, &authorization, &event_id, body, started)
                .await;
        }
        let destination = match self.sender.check_destination(&url).await {
            Ok(destination) => destination,
            Err(verdict) => return outcome(verdict),
        };
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(AUTHORIZATION, authorization);
        // Receivers deduplicate by event id: an ambiguous failure is retried (module docs).
        let Some(delivery) = send_fenced(
            &self.sender,
            attempt,
            &destination,
            headers,
            body,
            true,
            started,
        )
        .await
        else {
            return Outcome::Abandoned;
        };
        let said = receiver_outcome(&delivery.body);
        match (delivery.verdict, said) {
            (Verdict::Done { .. }, Some(said)) => Outcome::Done {
                readback_ref: Some(format!("{} {said}", delivery.status.unwrap_or(200))),
            },
            (Verdict::Failed { .. }, Some(said)) if said.starts_with("refuse-") => {
                Outcome::Failed {
                    code: ErrorCode::new(said).expect("the v1 outcome terms are valid codes"),
                }
            }
            (verdict, _) => outcome(verdict),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpSenderConfig;

    fn sender() -> NetworkSender {
        NetworkSender::new(&HttpSenderConfig::default()).unwrap()
    }

    fn dest(url: &str, token: Option<&str>, env: Option<&str>) -> EnvelopeDestinationConfig {
        EnvelopeDestinationConfig {
            url: url.into(),
            bearer_token: token.map(Into::into),
            bearer_token_env: env.map(Into::into),
        }
    }

    #[test]
    fn outcomes_are_read_from_a_closed_set() {
        let check = |body: &str, want: Option<&str>| {
            assert_eq!(receiver_outcome(body.as_bytes()), want, "{body}")
        };
        check(
            r#"{"outcome":"ignore-duplicate","reason":"x"}"#,
            Some("ignore-duplicate"),
        );
        check(r#"{"code":"refuse-replay"}"#, Some("refuse-replay"));
        check(r#"{"outcome":"accept-delayed"}"#, Some("accept-delayed"));
        check(r#"{"outcome":"you have been pwned"}"#, None);
        check(r#"{"code":"unauthenticated"}"#, None);
        check("not json", None);
        check("", None);
    }

    #[test]
    fn credentials_pick_the_most_specific_prefix_and_never_print() {
        let config = EnvelopeConfig {
            destinations: vec![
                dest("https://b.example/", Some("origin-token"), None),
                dest(
                    "https://b.example/v1/tenants/acme",
                    Some("acme-token"),
                    None,
                ),
            ],
        };
        let a = EnvelopeAdapter::new(sender(), &config).unwrap();
        let url = |s: &str| Url::parse(s).unwrap();
        let got = |s: &str| {
            a.credential(&url(s))
                .map(|h| h.to_str().unwrap().to_owned())
        };
        assert_eq!(
            got("https://b.example/v1/tenants/acme/projects/web/envelopes").as_deref(),
            Some("Bearer acme-token")
        );
        assert_eq!(
            got("https://b.example/v1/tenants/other/projects/web/envelopes").as_deref(),
            Some("Bearer origin-token")
        );
        assert_eq!(got("https://c.example/v1/"), None);
        // A NATS server is a destination like any other: its entry covers its subjects.
        let nats = EnvelopeAdapter::new(
            sender(),
            &EnvelopeConfig {
                destinations: vec![dest("nats://127.0.0.1:4222/", Some("nats-token"), None)],
            },
        )
        .unwrap();
        assert!(nats.has_credential_for("nats://127.0.0.1:4222/wharf.inbox.acme.web"));
        assert!(!nats.has_credential_for("nats://127.0.0.1:4223/wharf.inbox.acme.web"));
        assert!(!nats.has_credential_for("https://127.0.0.1:4222/wharf.inbox.acme.web"));
        assert!(!format!("{a:?} {config:?}").contains("token\""));
        assert!(!format!("{config:?}").contains("acme-token"));
    }

    #[test]
    fn bad_destinations_are_refused() {
        for d in [
            dest("ftp://b.example/", Some("t"), None),
            dest("https://b.example/", None, None),
            dest("https://b.example/", Some("t"), Some("X")),
            dest("https://b.example/", Some("bad\ntoken"), None),
            dest("https://b.example/", Some(""), None),
            dest(
                "https://b.example/",
                None,
                Some("WHARF_SURELY_UNSET_VARIABLE_1234"),
            ),
        ] {
            let config = EnvelopeConfig {
                destinations: vec![d.clone()],
            };
            assert!(EnvelopeAdapter::new(sender(), &config).is_err(), "{d:?}");
        }
        let parsed: EnvelopeConfig = serde_json::from_str(
            r#"{"destinations": [{"url": "https://b.example/", "bearer_token": "t"}]}"#,
        )
        .unwrap();
        assert_eq!(parsed.destinations.len(), 1);
        assert!(serde_json::from_str::<EnvelopeConfig>(r#"{"destination": []}"#).is_err());
    }

    #[test]
    fn literal_private_destinations_are_refused_at_enqueue() {
        let a = EnvelopeAdapter::new(sender(), &EnvelopeConfig::default()).unwrap();
        let unsigned = wharf::core::envelope::Envelope {
            schema_version: 1,
            event_type: "sync_cursor".into(),
            tenant_id: "acme".into(),
            project_id: "web".into(),
            event_id: "01J00000000000000000000001".into(),
            producer_sequence: 1,
            occurred_at: "2024-05-01T12:00:00Z".into(),
            idempotency_key: "k".into(),
            producer_version: "test".into(),
            payload: serde_json::json!({"producer_id": "p", "acknowledged_sequence": 1,
                                        "acknowledged_event_id": null, "version": 1}),
            integrity: wharf::core::envelope::Integrity {
                algorithm: "Ed25519".into(),
                key_id: "k1".into(),
                signature: String::new(),
            },
        };
        let key = ed25519_dalek::SigningKey::from_bytes(&[3; 32]);
        let envelope = wharf::core::sign::sign(&unsigned, &key, "k1").unwrap();
        let payload = |url: &str| {
            EnvelopeDelivery {
                destination_url: url.into(),
                envelope: envelope.clone(),
            }
            .to_payload()
        };
        assert_eq!(a.validate(&payload("https://b.example/v1/")), Ok(()));
        assert_eq!(a.validate(&payload("https://8.8.8.8/v1/")), Ok(()));
        assert!(a.validate(&payload("http://10.0.0.1/v1/")).is_err());
        assert!(a.validate(&payload("http://[::1]/v1/")).is_err());
        // Only configured NATS servers have a credential; the HTTP address guard is not theirs.
        assert_eq!(
            a.validate(&payload("nats://127.0.0.1:4222/wharf.inbox.acme.web")),
            Ok(())
        );
    }

    #[test]
    fn spec_is_valid() {
        let a = EnvelopeAdapter::new(sender(), &EnvelopeConfig::default()).unwrap();
        let spec = a.spec();
        spec.validate().unwrap();
        assert_eq!(spec.name, "envelope");
        assert!(!spec.at_most_once);
        assert!(
            a.validate(&serde_json::json!({"destination_url": "x"}))
                .is_err()
        );
    }
}
