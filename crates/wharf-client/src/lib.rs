//! The producer side of wharf's inbox: build, sign and send `controlplane/v1` envelopes.
//!
//! ```no_run
//! # async fn example() -> Result<(), wharf_client::Error> {
//! use wharf_client::{Producer, ProducerConfig};
//! let seed = [7u8; 32]; // from `wharf key generate`
//! let config = ProducerConfig::new(
//!     "http://127.0.0.1:8080", "acme", "web", "wharf_…token…", "k1", seed,
//! );
//! let producer = Producer::new(config, 1)?;
//! let envelope = producer.envelope(
//!     "sync_cursor",
//!     serde_json::json!({"producer_id": "laptop-1", "acknowledged_sequence": 0,
//!                        "acknowledged_event_id": null, "version": 1}),
//!     None,
//! )?;
//! let answer = producer.send(&envelope).await?;
//! assert!(answer.is_acknowledged());
//! println!("{} {} cursor={}", answer.outcome.as_str(), answer.reason, producer.acknowledged_sequence());
//! # Ok(()) }
//! ```
//!
//! Owns: envelope construction (sequence, event id, time), signing (always RFC 8785, through
//! `wharf_core::sign`), the HTTP exchange, the retry policy, and the producer's memory of its
//! next sequence and of the stream's acknowledged sequence. Must not know any server rule: what
//! an outcome means is the server's answer, read as is.
//!
//! Retries send the **same bytes** every time: an envelope is built and signed once, so a retry
//! after a lost answer is recognised by the server as a duplicate (`ignore-duplicate`) and never
//! stored twice. Only answers that say nothing was decided are retried: a transport failure,
//! 429 (after its `Retry-After`), 502, 503, 504. A decided outcome (200, 409, 422) is returned as
//! an [`Answer`]; 401, 413 and other client errors are a [`Error::Refused`].
//!
//! TLS uses rustls with the *ring* provider and the webpki root store; plain `http://` works for
//! loopback and tests.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ed25519_dalek::SigningKey;
use rand::Rng as _;
use serde::Deserialize;
use serde_json::Value;
use wharf_core::backoff::Backoff;
use wharf_core::envelope::{Envelope, Integrity};
use wharf_core::inbox::Outcome;

/// Longest wait a `Retry-After` may impose on one retry. A server asking for more than this is
/// obeyed up to it, so a misconfigured limit cannot park a producer for hours.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(60);

/// How a [`Producer`] reaches its stream and signs.
#[derive(Clone)]
pub struct ProducerConfig {
    /// The server's base URL, e.g. `https://wharf.example.com` or `http://127.0.0.1:8080`.
    pub base_url: String,
    /// The tenant (also the URL's).
    pub tenant: String,
    /// The project (also the URL's).
    pub project: String,
    /// The bearer credential from `wharf credential issue`.
    pub token: String,
    /// The key id the server knows the public key under.
    pub key_id: String,
    /// The Ed25519 private seed (from `wharf key generate`).
    pub signing_key: SigningKey,
    /// `producer_version` written into every envelope (1..=64 bytes).
    pub producer_version: String,
    /// Most attempts per send, the first included. Default 8.
    pub attempts_max: u32,
    /// Spacing of retries. Default 200 ms doubling to 10 s, ±20 %.
    pub backoff: Backoff,
    /// Whole-request timeout. Default 30 s.
    pub request_timeout: Duration,
    /// Connect timeout. Default 5 s.
    pub connect_timeout: Duration,
}

impl std::fmt::Debug for ProducerConfig {
    // Neither the token nor the seed may reach a log through `{:?}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerConfig")
            .field("base_url", &self.base_url)
            .field("tenant", &self.tenant)
            .field("project", &self.project)
            .field("token", &"<redacted>")
            .field("key_id", &self.key_id)
            .field("signing_key", &"<redacted>")
            .field("producer_version", &self.producer_version)
            .field("attempts_max", &self.attempts_max)
            .finish_non_exhaustive()
    }
}

impl ProducerConfig {
    /// A configuration with the defaults above.
    pub fn new(
        base_url: impl Into<String>,
        tenant: impl Into<String>,
        project: impl Into<String>,
        token: impl Into<String>,
        key_id: impl Into<String>,
        seed: [u8; 32],
    ) -> ProducerConfig {
        ProducerConfig {
            base_url: base_url.into(),
            tenant: tenant.into(),
            project: project.into(),
            token: token.into(),
            key_id: key_id.into(),
            signing_key: SigningKey::from_bytes(&seed),
            producer_version: concat!("wharf-client/", env!("CARGO_PKG_VERSION")).to_owned(),
            attempts_max: 8,
            backoff: Backoff {
                base_ms: 200,
                factor: 2,
                cap_ms: 10_000,
                jitter_percent: 20,
            },
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// Why a send (or a build) failed. A decided refusal is not an error: it is an [`Answer`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The envelope breaks a bound of SPEC §3.1 (or the key id does); nothing was sent. Fix the
    /// input; retrying never helps.
    #[error("envelope cannot be built: {0}")]
    Build(#[from] wharf_core::sign::SignError),
    /// The HTTP client could not be set up (TLS, base URL). Retrying never helps.
    #[error("client setup: {0}")]
    Setup(String),
    /// The server refused the request as a whole and decided nothing: 401 (credential), 413
    /// (body too large), or another 4xx. Retrying the same request never helps.
    #[error("refused with HTTP {status}: {code}: {reason} (correlation id {correlation_id})")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The server's stable code.
        code: String,
        /// The server's reason.
        reason: String,
        /// The server's correlation id.
        correlation_id: String,
    },
    /// Every attempt failed without a decision (transport errors, 429, 5xx). Nothing may have
    /// been stored — or it was and the answer was lost: sending the same envelope again later is
    /// safe either way.
    #[error("no decision after {attempts} attempts: {last}")]
    Exhausted {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
}

/// The acceptance a duplicate repeats.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OriginalAnswer {
    /// The original outcome.
    pub outcome: String,
    /// The original request's correlation id.
    pub correlation_id: String,
}

/// The server's decision on one envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The public v1 outcome.
    pub outcome: Outcome,
    /// The stable reason.
    pub reason: String,
    /// The request's correlation id.
    pub correlation_id: String,
    /// The stream's contiguous cursor after the decision.
    pub acknowledged_sequence: u64,
    /// For `ignore-duplicate`: the acceptance it repeats.
    pub original: Option<OriginalAnswer>,
    /// The HTTP status.
    pub http_status: u16,
    /// Attempts it took (1 when the first went through).
    pub attempts: u32,
}

impl Answer {
    /// Whether the server holds the envelope: the producer may forget it.
    pub fn is_acknowledged(&self) -> bool {
        self.outcome.is_acknowledged()
    }
}

/// One envelope's decision inside a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemAnswer {
    /// Position in the batch.
    pub index: usize,
    /// The public v1 outcome.
    pub outcome: Outcome,
    /// The stable reason.
    pub reason: String,
    /// Its event id, when the server could read it.
    pub event_id: Option<String>,
    /// Its sequence, when the server could read it.
    pub producer_sequence: Option<u64>,
    /// For `ignore-duplicate`: the acceptance it repeats.
    pub original: Option<OriginalAnswer>,
}

/// The server's decisions on a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchAnswer {
    /// The request's correlation id.
    pub correlation_id: String,
    /// The stream's contiguous cursor after the batch.
    pub acknowledged_sequence: u64,
    /// One decision per envelope, in order.
    pub items: Vec<ItemAnswer>,
    /// Attempts it took.
    pub attempts: u32,
}

/// The wire shapes (see `wharf-http`'s ingest routes).
mod wire {
    use serde::Deserialize;

    use super::OriginalAnswer;

    #[derive(Deserialize)]
    pub struct Decided {
        pub outcome: String,
        pub reason: String,
        pub correlation_id: String,
        pub acknowledged_sequence: u64,
        #[serde(default)]
        pub original: Option<OriginalAnswer>,
    }

    #[derive(Deserialize)]
    pub struct Item {
        pub index: usize,
        pub outcome: String,
        pub reason: String,
        #[serde(default)]
        pub event_id: Option<String>,
        #[serde(default)]
        pub producer_sequence: Option<u64>,
        #[serde(default)]
        pub original: Option<OriginalAnswer>,
    }

    #[derive(Deserialize)]
    pub struct Batch {
        pub correlation_id: String,
        pub acknowledged_sequence: u64,
        pub results: Vec<Item>,
    }

    #[derive(Deserialize)]
    pub struct Error {
        pub code: String,
        pub reason: String,
        pub correlation_id: String,
    }
}

#[derive(Debug)]
struct State {
    next_sequence: u64,
    acknowledged_sequence: u64,
}

/// A producer: one stream's sender. Cheap to share behind an `Arc`; sequences are handed out
/// under a lock, so concurrent [`Producer::envelope`] calls never reuse one.
#[derive(Debug)]
pub struct Producer {
    http: reqwest::Client,
    config: ProducerConfig,
    single_url: String,
    batch_url: String,
    state: Arc<Mutex<State>>,
}

/// A rustls configuration with the *ring* provider and the webpki roots.
fn tls_config() -> Result<rustls::ClientConfig, Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| Error::Setup(format!("TLS: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(config)
}

/// Percent-free path segment check: identities are `[A-Za-z0-9._:-]`, so they go into the URL as
/// they are; anything else is refused before it could change the path.
fn segment(what: &str, value: &str) -> Result<(), Error> {
    if wharf_core::envelope::is_identity(value) {
        Ok(())
    } else {
        Err(Error::Setup(format!(
            "{what} {value:?} is not a wharf identity"
        )))
    }
}

impl Producer {
    /// A producer whose next envelope gets `next_sequence` (≥ 1). Persist
    /// [`Producer::next_sequence`] between runs: reusing a sequence with different content is
    /// refused as tampered.
    pub fn new(config: ProducerConfig, next_sequence: u64) -> Result<Producer, Error> {
        segment("tenant", &config.tenant)?;
        segment("project", &config.project)?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config()?)
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout)
            // A redirect would re-send the credential to wherever it points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Error::Setup(e.to_string()))?;
        let base = config.base_url.trim_end_matches('/');
        let prefix = format!(
            "{base}/v1/tenants/{}/projects/{}/envelopes",
            config.tenant, config.project
        );
        Ok(Producer {
            http,
            single_url: prefix.clone(),
            batch_url: format!("{prefix}:batch"),
            config,
            state: Arc::new(Mutex::new(State {
                next_sequence: next_sequence.max(1),
                acknowledged_sequence: 0,
            })),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is two integers; a panic elsewhere cannot leave them half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sequence the next [`Producer::envelope`] will use.
    pub fn next_sequence(&self) -> u64 {
        self.state().next_sequence
    }

    /// The highest contiguous cursor the server reported for this stream.
    pub fn acknowledged_sequence(&self) -> u64 {
        self.state().acknowledged_sequence
    }

    /// The configuration.
    pub fn config(&self) -> &ProducerConfig {
        &self.config
    }

    /// Builds and signs the next envelope of the stream: the next sequence, a fresh ULID event
    /// id, the current time, and `idempotency_key` (the event id when `None`). The sequence is
    /// used up even if the envelope is never sent; the server's cursor then waits at the gap
    /// until an operator skips it, so send what you build.
    pub fn envelope(
        &self,
        event_type: &str,
        payload: Value,
        idempotency_key: Option<String>,
    ) -> Result<Envelope, Error> {
        let event_id = ulid::Ulid::new().to_string();
        let mut state = self.state();
        let envelope = Envelope {
            schema_version: wharf_core::envelope::SCHEMA_VERSION,
            event_type: event_type.to_owned(),
            tenant_id: self.config.tenant.clone(),
            project_id: self.config.project.clone(),
            idempotency_key: idempotency_key.unwrap_or_else(|| event_id.clone()),
            event_id,
            producer_sequence: state.next_sequence,
            occurred_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            producer_version: self.config.producer_version.clone(),
            payload,
            integrity: Integrity {
                algorithm: wharf_core::envelope::ALGORITHM.to_owned(),
                key_id: String::new(),
                signature: String::new(),
            },
        };
        let signed = self.sign(&envelope)?;
        state.next_sequence += 1;
        Ok(signed)
    }

    /// Signs any envelope with this producer's key (for callers that build their own).
    pub fn sign(&self, envelope: &Envelope) -> Result<Envelope, Error> {
        Ok(wharf_core::sign::sign(
            envelope,
            &self.config.signing_key,
            &self.config.key_id,
        )?)
    }

    fn remember(&self, acknowledged_sequence: u64) {
        let mut state = self.state();
        state.acknowledged_sequence = state.acknowledged_sequence.max(acknowledged_sequence);
    }

    /// Sends one envelope, retrying the same bytes until the server decides.
    pub async fn send(&self, envelope: &Envelope) -> Result<Answer, Error> {
        let body = envelope
            .to_canonical_json()
            .map_err(|e| Error::Build(wharf_core::envelope::EnvelopeError::from(e).into()))?;
        let (status, bytes, attempts) = self.exchange(&self.single_url, body).await?;
        let decided: wire::Decided =
            serde_json::from_slice(&bytes).map_err(|e| Error::Exhausted {
                attempts,
                last: format!("HTTP {status} with an unreadable answer: {e}"),
            })?;
        let outcome = parse_outcome(&decided.outcome, attempts)?;
        self.remember(decided.acknowledged_sequence);
        Ok(Answer {
            outcome,
            reason: decided.reason,
            correlation_id: decided.correlation_id,
            acknowledged_sequence: decided.acknowledged_sequence,
            original: decided.original,
            http_status: status,
            attempts,
        })
    }

    /// Sends many envelopes of this stream in one request, retrying the same bytes until the
    /// server decides them all (in one transaction).
    pub async fn send_batch(&self, envelopes: &[Envelope]) -> Result<BatchAnswer, Error> {
        let mut body = Vec::with_capacity(envelopes.len() * 1024 + 16);
        body.extend_from_slice(b"{\"envelopes\":[");
        for (i, envelope) in envelopes.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend(
                envelope.to_canonical_json().map_err(|e| {
                    Error::Build(wharf_core::envelope::EnvelopeError::from(e).into())
                })?,
            );
        }
        body.extend_from_slice(b"]}");
        let (status, bytes, attempts) = self.exchange(&self.batch_url, body).await?;
        if status != 200 {
            // A batch refused as a whole (not a bounded list of envelopes) answers like a single
            // refusal; nothing in it was decided.
            let decided: Option<wire::Decided> = serde_json::from_slice(&bytes).ok();
            return Err(Error::Refused {
                status,
                code: decided
                    .as_ref()
                    .map_or_else(|| "unknown".to_owned(), |d| d.outcome.clone()),
                reason: decided
                    .as_ref()
                    .map_or_else(String::new, |d| d.reason.clone()),
                correlation_id: decided.map_or_else(String::new, |d| d.correlation_id),
            });
        }
        let batch: wire::Batch = serde_json::from_slice(&bytes).map_err(|e| Error::Exhausted {
            attempts,
            last: format!("HTTP {status} with an unreadable answer: {e}"),
        })?;
        self.remember(batch.acknowledged_sequence);
        let items = batch
            .results
            .into_iter()
            .map(|item| {
                Ok(ItemAnswer {
                    index: item.index,
                    outcome: parse_outcome(&item.outcome, attempts)?,
                    reason: item.reason,
                    event_id: item.event_id,
                    producer_sequence: item.producer_sequence,
                    original: item.original,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(BatchAnswer {
            correlation_id: batch.correlation_id,
            acknowledged_sequence: batch.acknowledged_sequence,
            items,
            attempts,
        })
    }

    /// POSTs `body` until an answer that decided something (200, 409, 422) or a refusal that
    /// retrying cannot change. Returns the status, the body and the attempts made.
    async fn exchange(&self, url: &str, body: Vec<u8>) -> Result<(u16, Vec<u8>, u32), Error> {
        let body = bytes_of(body);
        let attempts_max = self.config.attempts_max.max(1);
        let mut last = String::new();
        for attempt in 1..=attempts_max {
            let sent = self
                .http
                .post(url)
                .bearer_auth(&self.config.token)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone())
                .send()
                .await;
            let mut wait = None;
            match sent {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let retry_after = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(|s| Duration::from_secs(s).min(RETRY_AFTER_MAX));
                    let bytes = match response.bytes().await {
                        Ok(bytes) => bytes.to_vec(),
                        Err(e) => {
                            last = format!("HTTP {status}, body lost: {e}");
                            self.pause(attempt, attempts_max, None).await;
                            continue;
                        }
                    };
                    match status {
                        200 | 409 | 422 => return Ok((status, bytes, attempt)),
                        429 | 502 | 503 | 504 => {
                            last = format!("HTTP {status}");
                            wait = retry_after;
                        }
                        _ => {
                            let error: Option<wire::Error> = serde_json::from_slice(&bytes).ok();
                            return Err(match error {
                                Some(e) => Error::Refused {
                                    status,
                                    code: e.code,
                                    reason: e.reason,
                                    correlation_id: e.correlation_id,
                                },
                                None => Error::Refused {
                                    status,
                                    code: "unknown".into(),
                                    reason: String::new(),
                                    correlation_id: String::new(),
                                },
                            });
                        }
                    }
                }
                Err(e) => {
                    // Connect failures, timeouts and resets: nothing says whether the server
                    // decided, and re-sending the same bytes is safe either way.
                    last = format!("transport: {e}");
                }
            }
            tracing::debug!(attempt, %last, "wharf send attempt failed; retrying the same envelope");
            self.pause(attempt, attempts_max, wait).await;
        }
        Err(Error::Exhausted {
            attempts: attempts_max,
            last,
        })
    }

    async fn pause(&self, attempt: u32, attempts_max: u32, retry_after: Option<Duration>) {
        if attempt >= attempts_max {
            return;
        }
        let draw = rand::thread_rng().gen_range(-1.0..=1.0);
        let backoff = Duration::from_millis(self.config.backoff.delay_ms(attempt, draw));
        tokio::time::sleep(retry_after.map_or(backoff, |r| r.max(backoff))).await;
    }
}

/// The body as a cheaply clonable buffer, so retries resend the very same bytes.
fn bytes_of(body: Vec<u8>) -> bytes::Bytes {
    bytes::Bytes::from(body)
}

fn parse_outcome(text: &str, attempts: u32) -> Result<Outcome, Error> {
    text.parse().map_err(|()| Error::Exhausted {
        attempts,
        last: format!("unknown outcome {text:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn producer() -> Producer {
        let config = ProducerConfig::new(
            "http://127.0.0.1:9/",
            "acme",
            "web",
            "wharf_x",
            "k1",
            [7; 32],
        );
        Producer::new(config, 5).unwrap()
    }

    #[test]
    fn envelopes_take_consecutive_sequences_and_verify() {
        let p = producer();
        let payload = serde_json::json!({"producer_id": "p", "acknowledged_sequence": 0,
            "acknowledged_event_id": null, "version": 1});
        let a = p.envelope("sync_cursor", payload.clone(), None).unwrap();
        let b = p
            .envelope("sync_cursor", payload, Some("key-b".into()))
            .unwrap();
        assert_eq!((a.producer_sequence, b.producer_sequence), (5, 6));
        assert_eq!(p.next_sequence(), 7);
        assert_eq!(a.idempotency_key, a.event_id);
        assert_eq!(b.idempotency_key, "key-b");
        let key = p.config.signing_key.verifying_key();
        let bytes = a.to_canonical_json().unwrap();
        let decoded = wharf_core::envelope::decode_envelope(&bytes).unwrap();
        assert!(wharf_core::sign::verify(&decoded, &key).is_ok());
        assert_eq!(
            p.single_url,
            "http://127.0.0.1:9/v1/tenants/acme/projects/web/envelopes"
        );
        assert!(p.batch_url.ends_with("/envelopes:batch"));
    }

    #[test]
    fn a_bad_envelope_uses_no_sequence() {
        let p = producer();
        assert!(
            p.envelope("Not-A-Type", serde_json::json!({}), None)
                .is_err()
        );
        assert_eq!(p.next_sequence(), 5);
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let p = producer();
        let text = format!("{:?}", p.config);
        assert!(!text.contains("wharf_x"));
    }

    #[tokio::test]
    async fn an_unreachable_server_exhausts_attempts() {
        let mut config =
            ProducerConfig::new("http://127.0.0.1:9", "acme", "web", "t", "k1", [7; 32]);
        config.attempts_max = 2;
        config.backoff.base_ms = 1;
        let p = Producer::new(config, 1).unwrap();
        let e = p
            .envelope("sync_cursor", serde_json::json!({"producer_id": "p", "acknowledged_sequence": 0, "acknowledged_event_id": null, "version": 1}), None)
            .unwrap();
        match p.send(&e).await {
            Err(Error::Exhausted { attempts: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
