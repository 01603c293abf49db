//! The network sender: one guarded, redirect-free, time-bounded HTTP client for every outbound
//! kind.
//!
//! Owns: the reqwest client (rustls with the ring provider and the webpki roots, HTTP/1.1, no
//! proxy, no redirects, no cookies), the guarded resolver, timeouts, bounded response reading,
//! and turning a reqwest result into a [`Verdict`] through `classify`. Must not know: the outbox
//! (`Attempt`, `Outcome`, fences), payloads, signatures or any kind's headers — the adapters
//! build the request and decide what a verdict means for their kind.
//!
//! # Why the guard cannot be bypassed
//!
//! [`NetworkSender::check_destination`] resolves the host *before* the adapter fences, so a
//! refused destination costs no fence and no provider call. It pins the addresses it approved
//! for a few seconds; the client's own resolver (the only one reqwest uses) hands the connector
//! exactly those pinned addresses, or resolves and guards again when the pin is gone. Either way
//! every address the connector ever sees has passed the guard, so a DNS answer that changes
//! between check and connect (rebinding) cannot reach a private address. IP-literal URLs are
//! never resolved by reqwest; the check guards them directly. No proxy is used: a proxy would
//! connect on our behalf to an address the guard never saw.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Url;
use reqwest::header::HeaderMap;

use super::classify::{
    REQUEST_ID_HEADERS, ResponseHead, TransportFailure, Verdict, classify_failure,
    classify_response,
};
use super::config::HttpSenderConfig;
use super::config::endpoint_covers;
use super::error::Error;
use super::guard::{AddressGuard, Forbidden};

/// How long an address approved by [`NetworkSender::check_destination`] is used without a new
/// lookup, in milliseconds. It only has to bridge the check and the connect (one short fence
/// transaction in between), so it is short: a receiver that moves is followed within seconds.
pub const PIN_MS: u64 = 10_000;

/// The most host names pinned at once. A miss only costs one more lookup, so when the table is
/// full of live pins it is simply cleared.
pub const PINNED_HOSTS_MAX: usize = 1_024;

/// How long an idle pooled connection is kept, in milliseconds. Below the 5 s keep-alive of the
/// most common servers (Node.js), so a request rarely goes out on a connection the server is
/// closing — which would look like a reset after send and end the action UNCERTAIN.
pub const POOL_IDLE_MS: u64 = 4_000;

/// Idle pooled connections kept per host: enough for a burst to one receiver to reuse
/// connections, small enough that many receivers do not pile up sockets.
pub const POOL_IDLE_PER_HOST_MAX: usize = 8;

/// What the sender reports about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// What it means for the action.
    pub verdict: Verdict,
    /// The response status, when a response head arrived.
    pub status: Option<u16>,
    /// The start of a final answer's body (2xx, or a refusal), at most `response_bytes_max`
    /// bytes, for an adapter that reads a stable outcome from it. Never stored as is. Empty for
    /// retryable statuses: their bodies are never read.
    pub body: Vec<u8>,
}

/// A URL whose host passed the guard. Only [`NetworkSender::check_destination`] makes one, so a
/// request cannot be sent without the check.
#[derive(Debug, Clone)]
pub struct Destination {
    url: Url,
}

impl Destination {
    /// The checked URL.
    pub fn url(&self) -> &Url {
        &self.url
    }
}

/// The network sender. Cheap to clone (one shared connection pool); build one per process.
#[derive(Clone)]
pub struct NetworkSender {
    client: reqwest::Client,
    resolver: Arc<GuardedResolver>,
    dedupe: Arc<Vec<Url>>,
    total_timeout: Duration,
    call_timeout_ms: u64,
    response_bytes_max: usize,
    retry_after_max: Duration,
}

impl std::fmt::Debug for NetworkSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkSender")
            .field("total_timeout", &self.total_timeout)
            .finish_non_exhaustive()
    }
}

impl NetworkSender {
    /// Builds the sender from a validated configuration (it is validated here again).
    ///
    /// TLS uses rustls with the ring provider passed explicitly, so the sender never depends on
    /// a process-wide default provider being installed.
    pub fn new(config: &HttpSenderConfig) -> Result<NetworkSender, Error> {
        config.validate()?;
        let connect_timeout = Duration::from_millis(config.connect_timeout_ms);
        let resolver = Arc::new(GuardedResolver {
            guard: config.guard()?,
            // A lookup is part of connecting; it gets no more time than a connection does.
            lookup_timeout: connect_timeout,
            pins: Mutex::new(HashMap::new()),
        });
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config()?)
            .dns_resolver(ResolverHandle(resolver.clone()))
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(connect_timeout)
            .timeout(Duration::from_millis(config.total_timeout_ms))
            .pool_idle_timeout(Duration::from_millis(POOL_IDLE_MS))
            .pool_max_idle_per_host(POOL_IDLE_PER_HOST_MAX)
            .user_agent(config.user_agent.clone())
            .http1_only()
            .build()?;
        Ok(NetworkSender {
            client,
            resolver,
            dedupe: Arc::new(config.dedupe_prefixes()?),
            total_timeout: Duration::from_millis(config.total_timeout_ms),
            call_timeout_ms: config.call_timeout_ms(),
            // Validated to at most RESPONSE_BYTES_MAX_LIMIT (1 MiB): fits any usize.
            response_bytes_max: usize::try_from(config.response_bytes_max).unwrap_or(usize::MAX),
            retry_after_max: Duration::from_millis(config.retry_after_max_ms),
        })
    }

    /// The configured total timeout: a kind's call timeout should not be longer.
    pub fn total_timeout(&self) -> Duration {
        self.total_timeout
    }

    /// The call timeout an HTTP kind on this sender declares
    /// ([`HttpSenderConfig::call_timeout_ms`]).
    pub fn call_timeout_ms(&self) -> u64 {
        self.call_timeout_ms
    }

    /// The address guard, for checking IP-literal URLs already at enqueue.
    pub fn guard(&self) -> &AddressGuard {
        &self.resolver.guard
    }

    /// Whether the configuration lists `url` as an endpoint that deduplicates by `webhook-id`.
    pub fn dedupes(&self, url: &Url) -> bool {
        self.dedupe
            .iter()
            .any(|prefix| endpoint_covers(prefix, url))
    }

    /// Resolves `url`'s host and applies the guard, before any fence. `Err` is the verdict to
    /// return without sending: Failed `destination_forbidden` when the guard refuses every
    /// address, Retry `dns_failed` when the name does not resolve, Failed `request_invalid`
    /// for a URL the sender cannot use at all.
    ///
    /// When a name resolves to some allowed and some refused addresses, only the allowed ones
    /// are used: the refused ones are never connected to, which is what the guard is for.
    pub async fn check_destination(&self, url: &Url) -> Result<Destination, Verdict> {
        let invalid = || classify_failure(TransportFailure::Unsendable, false);
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid());
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(invalid)?;
        // The URL parser already normalised every IPv4 spelling (`2130706433`, `0x7f.1`) to
        // dotted decimal and brackets IPv6, so a literal is recognised here or not at all.
        match literal_ip(host) {
            Some(ip) => {
                if let Err(refused) = self.resolver.guard.check(ip) {
                    // Once per action (the refusal is final), so warn: the operator's fix is a
                    // setting, and this line names it.
                    tracing::warn!(%refused, url = %url, "destination refused");
                    return Err(classify_failure(TransportFailure::Forbidden, false));
                }
            }
            None => {
                self.resolver
                    .resolve_guarded(host)
                    .await
                    .map_err(|e| classify_failure(e.failure(), false))?;
            }
        }
        Ok(Destination { url: url.clone() })
    }

    /// POSTs `body` with `headers` to `destination`, within the total timeout or `call_timeout`
    /// if that is shorter, and classifies the result. `dedupe` says the receiver deduplicates
    /// (by `webhook-id` or event id), which turns an ambiguous failure into a retry.
    ///
    /// Call it right after the fence: from here on the request may reach the receiver.
    pub async fn post(
        &self,
        destination: &Destination,
        headers: HeaderMap,
        body: Vec<u8>,
        call_timeout: Option<Duration>,
        dedupe: bool,
    ) -> Delivery {
        let timeout = call_timeout.map_or(self.total_timeout, |c| c.min(self.total_timeout));
        let deadline = Instant::now() + timeout;
        if timeout.is_zero() {
            // The caller's budget was spent before the request (a stop or a starved thread
            // after the fence): nothing is sent, so nothing can overlap the lease's next holder.
            return Delivery {
                verdict: classify_failure(TransportFailure::Expired, dedupe),
                status: None,
                body: Vec::new(),
            };
        }
        let sending = self
            .client
            .post(destination.url.clone())
            .headers(headers)
            .body(body)
            .timeout(timeout)
            .send();
        // `before` looks at the clock ahead of every poll: a process stopped past the deadline
        // does not write the request when it resumes (see `crate::deadline`).
        let sent = crate::deadline::before(deadline.into(), sending).await;
        let mut response = match sent {
            Ok(Ok(response)) => response,
            Err(crate::deadline::Expired) => {
                return Delivery {
                    verdict: classify_failure(TransportFailure::TimeoutAfterSend, dedupe),
                    status: None,
                    body: Vec::new(),
                };
            }
            Ok(Err(err)) => {
                let failure = transport_failure(&err);
                tracing::debug!(
                    host = destination.url.host_str().unwrap_or(""),
                    ?failure,
                    "request failed without a response"
                );
                return Delivery {
                    verdict: classify_failure(failure, dedupe),
                    status: None,
                    body: Vec::new(),
                };
            }
        };
        let status = response.status().as_u16();
        let request_id = REQUEST_ID_HEADERS.iter().find_map(|name| {
            response
                .headers()
                .get(*name)
                .and_then(|v| v.to_str().ok())
                .map(|v| (*name, v.to_owned()))
        });
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let verdict = classify_response(
            ResponseHead {
                status,
                retry_after: retry_after.as_deref(),
                request_id: request_id.as_ref().map(|(n, v)| (*n, v.as_str())),
            },
            chrono::Utc::now(),
            self.retry_after_max,
        );
        let body = if matches!(verdict, Verdict::Done { .. } | Verdict::Failed { .. }) {
            // A final answer's body may name the receiver's own stable outcome (the envelope
            // kind reads it); the adapter keeps only a code matched against a closed set.
            read_bounded(&mut response, self.response_bytes_max, deadline).await
        } else {
            // A retry is decided by the status alone; do not spend the budget on its body.
            Vec::new()
        };
        Delivery {
            verdict,
            status: Some(status),
            body,
        }
    }
}

/// The address in a URL host that is an IP literal (`127.0.0.1`, `[::1]`).
pub(crate) fn literal_ip(host: &str) -> Option<IpAddr> {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .parse()
        .ok()
}

/// Up to `max` bytes of the body, read until `deadline`. A body that stalls or breaks after a
/// status arrived changes nothing: the status already decided, so whatever was read is kept.
async fn read_bounded(response: &mut reqwest::Response, max: usize, deadline: Instant) -> Vec<u8> {
    let mut out = Vec::new();
    // Bounded: every turn either adds at least one byte up to `max`, or ends.
    while out.len() < max {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, response.chunk()).await {
            Ok(Ok(Some(chunk))) if !chunk.is_empty() => {
                let take = chunk.len().min(max - out.len());
                out.extend_from_slice(&chunk[..take]);
            }
            Ok(Ok(Some(_))) => continue,
            _ => break,
        }
    }
    out
}

/// What a reqwest error without a response means. Anything not provably before sending is
/// treated as after sending: the conservative side is UNCERTAIN, never a duplicate.
fn transport_failure(err: &reqwest::Error) -> TransportFailure {
    if has_source::<Forbidden>(err) {
        TransportFailure::Forbidden
    } else if err.is_builder() {
        TransportFailure::Unsendable
    } else if err.is_connect() {
        if err.is_dns() || has_source::<LookupFailed>(err) {
            TransportFailure::Dns
        } else if err.is_timeout() {
            TransportFailure::ConnectTimeout
        } else {
            TransportFailure::Connect
        }
    } else if err.is_timeout() {
        TransportFailure::TimeoutAfterSend
    } else {
        TransportFailure::LostAfterSend
    }
}

fn has_source<E: std::error::Error + 'static>(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    // Bounded: error chains are short; 32 links is far beyond any real one.
    for _ in 0..32 {
        match source {
            Some(e) if e.is::<E>() => return true,
            Some(e) => source = e.source(),
            None => return false,
        }
    }
    false
}

/// The rustls client configuration: ring, TLS 1.2 and 1.3, the webpki (Mozilla) roots.
fn tls_config() -> Result<rustls::ClientConfig, Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A name that did not resolve (or resolved to nothing) in time.
#[derive(Debug, thiserror::Error)]
#[error("name resolution failed")]
struct LookupFailed;

/// Why a guarded lookup produced no usable address.
#[derive(Debug)]
enum ResolveError {
    Lookup(LookupFailed),
    Forbidden(Forbidden),
}

impl ResolveError {
    fn failure(&self) -> TransportFailure {
        match self {
            ResolveError::Lookup(_) => TransportFailure::Dns,
            ResolveError::Forbidden(_) => TransportFailure::Forbidden,
        }
    }
}

#[derive(Debug)]
struct Pin {
    addrs: Vec<SocketAddr>,
    at: Instant,
}

/// Resolves names for the client and for the pre-fence check, admitting only addresses the
/// guard allows.
#[derive(Debug)]
struct GuardedResolver {
    guard: AddressGuard,
    lookup_timeout: Duration,
    pins: Mutex<HashMap<String, Pin>>,
}

impl GuardedResolver {
    /// The guarded addresses of `name` (port 0: the connector supplies the URL's port), from a
    /// fresh pin or a new lookup that is then pinned.
    async fn resolve_guarded(&self, name: &str) -> Result<Vec<SocketAddr>, ResolveError> {
        let name = name.to_ascii_lowercase();
        if let Some(addrs) = self.pinned(&name) {
            return Ok(addrs);
        }
        let lookup = tokio::net::lookup_host((name.as_str(), 0));
        let all: Vec<SocketAddr> = match tokio::time::timeout(self.lookup_timeout, lookup).await {
            Ok(Ok(addrs)) => addrs.take(ADDRS_PER_NAME_MAX).collect(),
            _ => return Err(ResolveError::Lookup(LookupFailed)),
        };
        if all.is_empty() {
            return Err(ResolveError::Lookup(LookupFailed));
        }
        let mut refused = None;
        let allowed: Vec<SocketAddr> = all
            .into_iter()
            .filter(|a| match self.guard.check(a.ip()) {
                Ok(()) => true,
                Err(f) => {
                    refused.get_or_insert(f);
                    false
                }
            })
            .collect();
        if allowed.is_empty() {
            let refused = refused.expect("a non-empty list with nothing allowed has a refusal");
            // Once per action (the refusal is final), so warn: the line names the setting.
            tracing::warn!(%refused, host = %name, "destination refused");
            return Err(ResolveError::Forbidden(refused));
        }
        self.pin(name, allowed.clone());
        Ok(allowed)
    }

    fn pinned(&self, name: &str) -> Option<Vec<SocketAddr>> {
        let pins = self.pins.lock().unwrap_or_else(|p| p.into_inner());
        pins.get(name)
            .filter(|p| p.at.elapsed() < Duration::from_millis(PIN_MS))
            .map(|p| p.addrs.clone())
    }

    fn pin(&self, name: String, addrs: Vec<SocketAddr>) {
        let mut pins = self.pins.lock().unwrap_or_else(|p| p.into_inner());
        if pins.len() >= PINNED_HOSTS_MAX {
            let fresh = Duration::from_millis(PIN_MS);
            pins.retain(|_, p| p.at.elapsed() < fresh);
            if pins.len() >= PINNED_HOSTS_MAX {
                pins.clear();
            }
        }
        pins.insert(
            name,
            Pin {
                addrs,
                at: Instant::now(),
            },
        );
    }
}

/// The most addresses kept per name: happy-eyeballs needs a few of each family, not dozens.
const ADDRS_PER_NAME_MAX: usize = 16;

/// The client's only resolver.
struct ResolverHandle(Arc<GuardedResolver>);

impl reqwest::dns::Resolve for ResolverHandle {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let resolver = self.0.clone();
        Box::pin(async move {
            match resolver.resolve_guarded(name.as_str()).await {
                Ok(addrs) => Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs),
                Err(ResolveError::Forbidden(f)) => Err(Box::new(f) as _),
                Err(ResolveError::Lookup(l)) => Err(Box::new(l) as _),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(allow: &[&str]) -> GuardedResolver {
        GuardedResolver {
            guard: AddressGuard::new(allow.iter().map(|s| s.parse().unwrap()).collect()),
            lookup_timeout: Duration::from_secs(5),
            pins: Mutex::new(HashMap::new()),
        }
    }

    #[tokio::test]
    async fn the_resolver_guards_every_answer() {
        // `localhost` resolves to loopback only: refused unless allowed.
        let refused = resolver(&[]).resolve_guarded("localhost").await;
        assert!(
            matches!(refused, Err(ResolveError::Forbidden(_))),
            "{refused:?}"
        );
        let allowed = resolver(&["127.0.0.0/8"])
            .resolve_guarded("LOCALHOST")
            .await
            .unwrap();
        assert!(allowed.iter().all(|a| a.ip().is_loopback() && a.is_ipv4()));
        let missing = resolver(&[]).resolve_guarded("nonexistent.invalid").await;
        assert!(
            matches!(missing, Err(ResolveError::Lookup(_))),
            "{missing:?}"
        );
    }

    #[tokio::test]
    async fn pins_are_used_and_bounded() {
        let r = resolver(&["127.0.0.0/8"]);
        let pinned: SocketAddr = "127.0.0.9:0".parse().unwrap();
        r.pin("example.test".into(), vec![pinned]);
        assert_eq!(r.resolve_guarded("example.test").await.unwrap(), [pinned]);
        for i in 0..PINNED_HOSTS_MAX + 5 {
            r.pin(format!("h{i}.test"), vec![pinned]);
        }
        assert!(r.pins.lock().unwrap().len() <= PINNED_HOSTS_MAX);
    }

    #[test]
    fn the_tls_configuration_builds_without_a_process_provider() {
        tls_config().unwrap();
    }
}
