//! The last steps every HTTP kind shares: fence, send, and turn the verdict into an outbox
//! [`Outcome`].
//!
//! Owns: the order "fence right before the request", the time budget left for the request
//! inside the kind's call timeout, and the one mapping from [`Verdict`] to [`Outcome`]. Must not
//! know: any kind's payload, headers or signatures.

use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use wharf::outbox::{Attempt, ErrorCode, Outcome};

use super::classify::Verdict;
use super::sender::{Delivery, Destination, NetworkSender};

/// Time kept back from the kind's call timeout when sizing the request's own timeout, in
/// milliseconds: the sender must give up (and name why) before the executor cuts the whole
/// call off with a generic `adapter_timeout`.
pub const CALL_RESERVE_MS: u64 = 500;

/// Fences, then POSTs, then maps the verdict. `started` is when `execute` began: the request
/// gets what is left of the kind's call timeout, minus [`CALL_RESERVE_MS`].
pub(crate) async fn fenced_post(
    sender: &NetworkSender,
    attempt: &mut Attempt,
    destination: &Destination,
    headers: HeaderMap,
    body: Vec<u8>,
    dedupe: bool,
    started: Instant,
) -> Outcome {
    match send_fenced(sender, attempt, destination, headers, body, dedupe, started).await {
        Some(delivery) => outcome(delivery.verdict),
        None => Outcome::Abandoned,
    }
}

/// Fences, then POSTs; `None` when the fence refused (nothing was sent: answer
/// [`Outcome::Abandoned`]). For a kind that reads more than the verdict from the answer.
pub(crate) async fn send_fenced(
    sender: &NetworkSender,
    attempt: &mut Attempt,
    destination: &Destination,
    headers: HeaderMap,
    body: Vec<u8>,
    dedupe: bool,
    started: Instant,
) -> Option<Delivery> {
    if let Err(refused) = attempt.fence().begin_write().await {
        tracing::debug!(%refused, "fence refused; not sending");
        return None;
    }
    let left = attempt
        .call_timeout()
        .saturating_sub(started.elapsed())
        .saturating_sub(Duration::from_millis(CALL_RESERVE_MS));
    Some(
        sender
            .post(destination, headers, body, Some(left), dedupe)
            .await,
    )
}

/// The outbox outcome of a verdict.
pub(crate) fn outcome(verdict: Verdict) -> Outcome {
    match verdict {
        Verdict::Done { readback_ref } => Outcome::Done {
            readback_ref: Some(readback_ref),
        },
        Verdict::Retry { after, code } => Outcome::Retry {
            after,
            code: error_code(code),
        },
        Verdict::Uncertain { code } => Outcome::Uncertain {
            code: error_code(code),
        },
        Verdict::Failed { code } => Outcome::Failed {
            code: error_code(code),
        },
    }
}

/// Every code `classify` makes is `[a-z0-9_]` and short; this fallback only guards against a
/// future code that breaks the alphabet, so the action still ends with *a* stable code.
fn error_code(code: String) -> ErrorCode {
    ErrorCode::new(code).unwrap_or(ErrorCode::from_static("http_code_invalid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verdict_maps() {
        let code = |c: &str| ErrorCode::new(c).unwrap();
        assert_eq!(
            outcome(Verdict::Done {
                readback_ref: "200".into()
            }),
            Outcome::Done {
                readback_ref: Some("200".into())
            }
        );
        assert_eq!(
            outcome(Verdict::Retry {
                after: Some(Duration::from_secs(7)),
                code: "http_429".into()
            }),
            Outcome::Retry {
                after: Some(Duration::from_secs(7)),
                code: code("http_429")
            }
        );
        assert_eq!(
            outcome(Verdict::Uncertain {
                code: "timeout_after_send".into()
            }),
            Outcome::Uncertain {
                code: code("timeout_after_send")
            }
        );
        assert_eq!(
            outcome(Verdict::Failed {
                code: "Not A Code".into()
            }),
            Outcome::Failed {
                code: code("http_code_invalid")
            }
        );
    }
}
