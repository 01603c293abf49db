//! What an HTTP exchange means for the action: the [`Verdict`] of SPEC §2.5.
//!
//! Owns: the mapping from a status code, a `Retry-After` header or a transport failure to done,
//! provable retry, ambiguous, or refused; the stable diagnostic codes; the bounded readback
//! reference. Must not know: sockets, reqwest, the outbox's types, or the clock (time is passed
//! in). Pure, so the whole table is tested without a network.
//!
//! The one question behind every row: *could the receiver have acted on the request?*
//! - A status line answers it: 2xx yes; 408, 429 and 5xx say "not this time" before any body,
//!   so a retry is safe; any other 4xx says "never", so retrying is pointless; a 3xx is not
//!   followed (the sender does no redirects, see `sender`), so the effect did not happen where
//!   it was meant to.
//! - With no status line, it depends on whether the request left: a connection that never
//!   opened (DNS, refused, connect timeout) provably sent nothing; a timeout or reset after
//!   the connection opened may have delivered it. That is UNCERTAIN, unless the receiver
//!   deduplicates by `webhook-id`, in which case a retry cannot make a second copy.

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};

/// The stable diagnostic codes this module produces (besides `http_<status>` and
/// `http_4xx_<status>`). They are part of the public surface: dashboards and dead-letter
/// queries match on them.
pub mod code {
    /// The host name did not resolve (no address, or the resolver failed or timed out).
    pub const DNS_FAILED: &str = "dns_failed";
    /// The TCP connection or TLS handshake failed (refused, unreachable, bad certificate).
    pub const CONNECT_FAILED: &str = "connect_failed";
    /// The TCP connection or TLS handshake did not finish within `connect_timeout_ms`.
    pub const CONNECT_TIMEOUT: &str = "connect_timeout";
    /// The guard refused every address of the destination (private, loopback, …).
    pub const DESTINATION_FORBIDDEN: &str = "destination_forbidden";
    /// The receiver answered with a 3xx; redirects are not followed.
    pub const REDIRECT: &str = "redirect";
    /// No response within the total timeout, after the connection opened.
    pub const TIMEOUT_AFTER_SEND: &str = "timeout_after_send";
    /// The request cannot be built or sent as addressed (an unusable URL or header).
    pub const REQUEST_INVALID: &str = "request_invalid";
    /// The call's deadline passed before the request was sent.
    pub const DEADLINE_PASSED: &str = "deadline_passed";
    /// The connection broke (reset, closed, protocol error) after it opened and before a
    /// response head arrived.
    pub const CONNECTION_LOST_AFTER_SEND: &str = "connection_lost_after_send";
}

/// The longest readback reference, in bytes: status plus a receiver's request id.
pub const READBACK_REF_BYTES_MAX: usize = 160;

/// The longest request id kept from a response header, in bytes.
pub const REQUEST_ID_BYTES_MAX: usize = 128;

/// Response headers whose value names the receiver's record of the request, in order of
/// preference. Only the first present is kept.
pub const REQUEST_ID_HEADERS: &[&str] = &["x-request-id", "request-id", "x-correlation-id"];

/// What a delivery means for the action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The receiver confirmed it (2xx). `readback_ref` is the status and, if the receiver sent
    /// one, its request id — bounded, visible ASCII, never body text.
    Done {
        /// e.g. `"201 x-request-id=8d1e…"`.
        readback_ref: String,
    },
    /// Provably not acted on, and a later attempt may succeed. `after` is the receiver's
    /// `Retry-After`, already capped; `None` means the kind's backoff.
    Retry {
        /// The receiver's requested wait, if any.
        after: Option<Duration>,
        /// A stable code.
        code: String,
    },
    /// The receiver may have acted on it; nothing sends it again.
    Uncertain {
        /// A stable code.
        code: String,
    },
    /// The receiver refused it, or it cannot be delivered as addressed.
    Failed {
        /// A stable code.
        code: String,
    },
}

impl Verdict {
    /// The stable code of a non-done verdict; `None` for `Done`.
    pub fn code(&self) -> Option<&str> {
        match self {
            Verdict::Done { .. } => None,
            Verdict::Retry { code, .. }
            | Verdict::Uncertain { code }
            | Verdict::Failed { code } => Some(code),
        }
    }
}

/// The parts of a response head that decide a verdict.
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'a> {
    /// The status code.
    pub status: u16,
    /// The `Retry-After` header, if present and ASCII.
    pub retry_after: Option<&'a str>,
    /// The first [`REQUEST_ID_HEADERS`] present, as (header name, value), if ASCII.
    pub request_id: Option<(&'a str, &'a str)>,
}

/// The verdict for a response head received at `now`; `Retry-After` waits are cut to
/// `retry_after_max`.
pub fn classify_response(
    head: ResponseHead<'_>,
    now: DateTime<Utc>,
    retry_after_max: Duration,
) -> Verdict {
    let status = head.status;
    match status {
        200..=299 => Verdict::Done {
            readback_ref: readback_ref(status, head.request_id),
        },
        300..=399 => Verdict::Failed {
            code: code::REDIRECT.to_owned(),
        },
        408 | 429 | 500..=599 => Verdict::Retry {
            after: head
                .retry_after
                .and_then(|v| parse_retry_after(v, now))
                .map(|d| d.min(retry_after_max)),
            code: format!("http_{status}"),
        },
        400..=499 => Verdict::Failed {
            code: format!("http_4xx_{status}"),
        },
        // 1xx never reaches here (the client consumes interim responses); 600..=999 is outside
        // HTTP's registry: the receiver answered, but not with acceptance.
        _ => Verdict::Failed {
            code: format!("http_status_{status}"),
        },
    }
}

/// How an exchange failed without a response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportFailure {
    /// Name resolution failed or returned nothing. Nothing was sent.
    Dns,
    /// Connecting or the TLS handshake failed. Nothing was sent.
    Connect,
    /// Connecting or the TLS handshake timed out. Nothing was sent.
    ConnectTimeout,
    /// The guard refused every address. Nothing was sent.
    Forbidden,
    /// The total timeout passed after the connection opened. The request may have arrived.
    TimeoutAfterSend,
    /// The connection broke after it opened. The request may have arrived.
    LostAfterSend,
    /// The client could not even build the request (a URL or header it cannot send). Nothing
    /// was sent, and the same request will never be sendable.
    Unsendable,
    /// The call's time was spent before the request could be sent (the process was stopped or
    /// starved after its fence). Nothing was sent.
    Expired,
}

/// The verdict for a failure without a response head. `dedupe` says the receiver
/// deduplicates by `webhook-id` (or event id), which makes an ambiguous failure retryable.
pub fn classify_failure(failure: TransportFailure, dedupe: bool) -> Verdict {
    let retry = |code: &str| Verdict::Retry {
        after: None,
        code: code.to_owned(),
    };
    let ambiguous = |code: &str| {
        if dedupe {
            retry(code)
        } else {
            Verdict::Uncertain {
                code: code.to_owned(),
            }
        }
    };
    match failure {
        TransportFailure::Dns => retry(code::DNS_FAILED),
        TransportFailure::Connect => retry(code::CONNECT_FAILED),
        TransportFailure::ConnectTimeout => retry(code::CONNECT_TIMEOUT),
        TransportFailure::Forbidden => Verdict::Failed {
            code: code::DESTINATION_FORBIDDEN.to_owned(),
        },
        TransportFailure::TimeoutAfterSend => ambiguous(code::TIMEOUT_AFTER_SEND),
        TransportFailure::LostAfterSend => ambiguous(code::CONNECTION_LOST_AFTER_SEND),
        TransportFailure::Unsendable => Verdict::Failed {
            code: code::REQUEST_INVALID.to_owned(),
        },
        TransportFailure::Expired => retry(code::DEADLINE_PASSED),
    }
}

/// The wait a `Retry-After` value asks for at `now`: delay-seconds or an HTTP-date (IMF-fixdate,
/// or the obsolete RFC 850 and asctime forms RFC 9110 still requires recipients to accept).
/// `None` for an unreadable value or a date not in the future: the kind's backoff then applies,
/// so a receiver that says "now" cannot make an action spin through its attempts.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.len() <= 20 && value.bytes().all(|b| b.is_ascii_digit()) {
        // More than 20 digits cannot be a u64; saturate rather than refuse, the cap applies.
        let seconds = value.parse::<u64>().unwrap_or(u64::MAX);
        return (seconds > 0).then(|| Duration::from_secs(seconds));
    }
    let at = parse_http_date(value)?;
    let wait = at.signed_duration_since(now).to_std().ok()?;
    (!wait.is_zero()).then_some(wait)
}

fn parse_http_date(value: &str) -> Option<DateTime<Utc>> {
    if value.len() > 64 {
        return None;
    }
    if let Some(imf) = value.strip_suffix(" GMT") {
        // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"; RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT".
        for format in ["%a, %d %b %Y %H:%M:%S", "%A, %d-%b-%y %H:%M:%S"] {
            if let Ok(naive) = NaiveDateTime::parse_from_str(imf, format) {
                return Some(naive.and_utc());
            }
        }
        return None;
    }
    // asctime: "Sun Nov  6 08:49:37 1994".
    NaiveDateTime::parse_from_str(value, "%a %b %e %H:%M:%S %Y")
        .ok()
        .map(|naive| naive.and_utc())
}

/// `"<status>"` or `"<status> <header>=<id>"`, with the id reduced to characters that are safe in
/// any log or UI and cut to `REQUEST_ID_BYTES_MAX` (128).
pub fn readback_ref(status: u16, request_id: Option<(&str, &str)>) -> String {
    let mut out = status.to_string();
    if let Some((header, id)) = request_id {
        let id: String = id
            .chars()
            .filter(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/' | '+' | '=')
            })
            .take(REQUEST_ID_BYTES_MAX)
            .collect();
        if !id.is_empty() {
            out.push(' ');
            out.push_str(header);
            out.push('=');
            out.push_str(&id);
        }
    }
    out.truncate(READBACK_REF_BYTES_MAX);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2024-05-01T12:00:00Z".parse().unwrap()
    }

    fn head(status: u16) -> ResponseHead<'static> {
        ResponseHead {
            status,
            retry_after: None,
            request_id: None,
        }
    }

    fn check(status: u16, expected: Verdict) {
        let max = Duration::from_secs(3600);
        assert_eq!(
            classify_response(head(status), now(), max),
            expected,
            "{status}"
        );
    }

    fn retry(code: &str, after: Option<u64>) -> Verdict {
        Verdict::Retry {
            after: after.map(Duration::from_secs),
            code: code.into(),
        }
    }

    fn failed(code: &str) -> Verdict {
        Verdict::Failed { code: code.into() }
    }

    fn uncertain(code: &str) -> Verdict {
        Verdict::Uncertain { code: code.into() }
    }

    #[test]
    fn statuses() {
        let done = |r: &str| Verdict::Done {
            readback_ref: r.into(),
        };
        check(200, done("200"));
        check(201, done("201"));
        check(204, done("204"));
        check(299, done("299"));
        check(301, failed("redirect"));
        check(302, failed("redirect"));
        check(304, failed("redirect"));
        check(307, failed("redirect"));
        check(308, failed("redirect"));
        check(400, failed("http_4xx_400"));
        check(401, failed("http_4xx_401"));
        check(404, failed("http_4xx_404"));
        check(409, failed("http_4xx_409"));
        check(410, failed("http_4xx_410"));
        check(413, failed("http_4xx_413"));
        check(422, failed("http_4xx_422"));
        check(408, retry("http_408", None));
        check(429, retry("http_429", None));
        check(500, retry("http_500", None));
        check(502, retry("http_502", None));
        check(503, retry("http_503", None));
        check(504, retry("http_504", None));
        check(599, retry("http_599", None));
        check(600, failed("http_status_600"));
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let max = Duration::from_secs(3600);
        let with = |status, value| {
            classify_response(
                ResponseHead {
                    status,
                    retry_after: Some(value),
                    request_id: None,
                },
                now(),
                max,
            )
        };
        assert_eq!(with(429, "7"), retry("http_429", Some(7)));
        assert_eq!(with(503, "120"), retry("http_503", Some(120)));
        assert_eq!(with(503, "86400"), retry("http_503", Some(3600)));
        assert_eq!(
            with(503, "99999999999999999999999"),
            retry("http_503", None),
            "not a number of seconds, not a date"
        );
        assert_eq!(
            with(503, "99999999999999999999"),
            retry("http_503", Some(3600))
        );
        assert_eq!(
            with(429, "Wed, 01 May 2024 12:00:30 GMT"),
            retry("http_429", Some(30))
        );
        assert_eq!(
            with(429, "Wed, 01 May 2024 11:00:00 GMT"),
            retry("http_429", None)
        );
        assert_eq!(with(429, "0"), retry("http_429", None));
        assert_eq!(with(429, "soon"), retry("http_429", None));
        assert_eq!(with(429, "-5"), retry("http_429", None));
        // Retry-After on a final refusal changes nothing.
        assert_eq!(with(400, "5"), failed("http_4xx_400"));
    }

    #[test]
    fn http_dates() {
        let check = |value: &str, secs: Option<u64>| {
            assert_eq!(
                parse_retry_after(value, now()),
                secs.map(Duration::from_secs),
                "{value}"
            )
        };
        check("Wed, 01 May 2024 12:01:00 GMT", Some(60));
        check("Wednesday, 01-May-24 12:01:00 GMT", Some(60));
        check("Wed May  1 12:01:00 2024", Some(60));
        check("Wed, 01 May 2024 12:01:00 +0000", None);
        check("", None);
        check(" 5 ", Some(5));
    }

    #[test]
    fn failures() {
        use TransportFailure::*;
        for dedupe in [false, true] {
            assert_eq!(classify_failure(Dns, dedupe), retry("dns_failed", None));
            assert_eq!(
                classify_failure(Connect, dedupe),
                retry("connect_failed", None)
            );
            assert_eq!(
                classify_failure(ConnectTimeout, dedupe),
                retry("connect_timeout", None)
            );
            assert_eq!(
                classify_failure(Forbidden, dedupe),
                failed("destination_forbidden")
            );
            assert_eq!(
                classify_failure(Unsendable, dedupe),
                failed("request_invalid")
            );
            assert_eq!(
                classify_failure(Expired, dedupe),
                retry("deadline_passed", None)
            );
        }
        assert_eq!(
            classify_failure(TimeoutAfterSend, false),
            uncertain("timeout_after_send")
        );
        assert_eq!(
            classify_failure(LostAfterSend, false),
            uncertain("connection_lost_after_send")
        );
        assert_eq!(
            classify_failure(TimeoutAfterSend, true),
            retry("timeout_after_send", None)
        );
        assert_eq!(
            classify_failure(LostAfterSend, true),
            retry("connection_lost_after_send", None)
        );
    }

    #[test]
    fn readback_refs_are_bounded_and_clean() {
        assert_eq!(readback_ref(200, None), "200");
        assert_eq!(
            readback_ref(201, Some(("x-request-id", "abc-123"))),
            "201 x-request-id=abc-123"
        );
        assert_eq!(
            readback_ref(200, Some(("x-request-id", "<script>"))),
            "200 x-request-id=script"
        );
        assert_eq!(readback_ref(200, Some(("x-request-id", "!!"))), "200");
        let long = "a".repeat(1000);
        let r = readback_ref(200, Some(("x-request-id", &long)));
        assert!(r.len() <= READBACK_REF_BYTES_MAX);
        for code in ["http_4xx_409", code::CONNECTION_LOST_AFTER_SEND] {
            assert!(code.len() <= 64);
        }
    }
}
