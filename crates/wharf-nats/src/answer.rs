//! The JSON a producer's reply subject receives: the same bytes HTTP would answer with, and
//! what the broker is told (ack, term, nak).
//!
//! Owns: the one mapping from an inbox [`Response`] to a [`Settlement`], and the answer's JSON
//! shapes (the HTTP layer's: `{"outcome", "reason", "correlation_id", "acknowledged_sequence",
//! "original"?}` when decided, `{"code", "reason", "correlation_id"}` otherwise), with the HTTP
//! status a `Wharf-Status` header carries. Must not know: sockets, the broker, HTTP types.

use std::time::Duration;

use serde::Serialize;
use wharf::inbox::{Response, Status};

/// The code of a 503 whose write may have committed (the HTTP layer's `outcome-unknown`).
pub const CODE_OUTCOME_UNKNOWN: &str = "outcome-unknown";
/// Its reason, as HTTP gives it.
pub const REASON_OUTCOME_UNKNOWN: &str = "temporarily unavailable; the outcome is unknown (it may have been committed), retry with the same idempotency key";

/// What the broker is told about a message once the pipeline answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Committed (accepted now, or a duplicate whose audit committed): never again.
    Ack,
    /// Refused in a way no redelivery can change (an outcome that refuses, a bad credential,
    /// too large): never again, so a poison message cannot hold up the ones behind it.
    Term,
    /// Nothing acknowledged (503, or limited): redeliver after the delay. Safe, because a
    /// commit that did land answers `ignore-duplicate` the next time.
    Nak(Duration),
}

impl Settlement {
    /// A stable label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Settlement::Ack => "ack",
            Settlement::Term => "term",
            Settlement::Nak(_) => "nak",
        }
    }
}

/// The settlement of an answer: `nak_delay` for a 503, the limiter's wait for a 429.
pub fn settlement(answer: &Response, nak_delay: Duration) -> Settlement {
    match answer.status {
        Status::Outcome(outcome) if outcome.is_acknowledged() => Settlement::Ack,
        Status::Outcome(_) | Status::TooLarge | Status::Unauthenticated => Settlement::Term,
        Status::RateLimited => Settlement::Nak(Duration::from_secs(
            answer.retry_after_s.unwrap_or(1).max(1),
        )),
        // Unavailable, and anything a later inbox adds: redelivering is the safe default.
        _ => Settlement::Nak(nak_delay),
    }
}

#[derive(Serialize)]
struct OriginalJson<'a> {
    outcome: &'a str,
    correlation_id: &'a str,
}

#[derive(Serialize)]
struct DecidedJson<'a> {
    outcome: &'a str,
    reason: &'a str,
    correlation_id: &'a str,
    acknowledged_sequence: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    original: Option<OriginalJson<'a>>,
}

#[derive(Serialize)]
struct ErrorJson<'a> {
    code: &'a str,
    reason: &'a str,
    correlation_id: &'a str,
}

/// The answer's JSON, exactly as the HTTP endpoint's body for the same answer.
pub fn json(answer: &Response) -> Vec<u8> {
    let bytes = match (answer.status, answer.acknowledged_sequence) {
        (Status::Outcome(outcome), Some(acknowledged_sequence)) => {
            serde_json::to_vec(&DecidedJson {
                outcome: outcome.as_str(),
                reason: answer.reason,
                correlation_id: &answer.correlation_id,
                acknowledged_sequence,
                original: answer.original.as_ref().map(|o| OriginalJson {
                    outcome: o.outcome.as_str(),
                    correlation_id: &o.correlation_id,
                }),
            })
        }
        (Status::Unavailable, _) => serde_json::to_vec(&ErrorJson {
            code: CODE_OUTCOME_UNKNOWN,
            reason: REASON_OUTCOME_UNKNOWN,
            correlation_id: &answer.correlation_id,
        }),
        (status, _) => serde_json::to_vec(&ErrorJson {
            code: status.as_str(),
            reason: answer.reason,
            correlation_id: &answer.correlation_id,
        }),
    };
    // Serialising plain strings and numbers cannot fail.
    bytes.unwrap_or_default()
}

/// The HTTP status the same answer has, for the reply's `Wharf-Status` header.
pub fn http_status(answer: &Response) -> u16 {
    answer.status.http_status()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wharf::inbox::{Original, Outcome};

    fn answer(status: Status, acknowledged: Option<u64>) -> Response {
        Response {
            status,
            reason: "r",
            correlation_id: "c".into(),
            acknowledged_sequence: acknowledged,
            retry_after_s: Some(3),
            original: None,
        }
    }

    #[test]
    fn settlements() {
        let nak = Duration::from_millis(250);
        let check = |status: Status, want: Settlement| {
            assert_eq!(
                settlement(&answer(status, Some(1)), nak),
                want,
                "{status:?}"
            )
        };
        check(Status::Outcome(Outcome::AcceptDelayed), Settlement::Ack);
        check(Status::Outcome(Outcome::AcceptReordered), Settlement::Ack);
        check(Status::Outcome(Outcome::IgnoreDuplicate), Settlement::Ack);
        check(Status::Outcome(Outcome::RefuseReplay), Settlement::Term);
        check(Status::Outcome(Outcome::RefuseTampered), Settlement::Term);
        check(
            Status::Outcome(Outcome::RefuseIncompatible),
            Settlement::Term,
        );
        check(Status::TooLarge, Settlement::Term);
        check(Status::Unauthenticated, Settlement::Term);
        check(Status::Unavailable, Settlement::Nak(nak));
        check(Status::RateLimited, Settlement::Nak(Duration::from_secs(3)));
    }

    #[test]
    fn json_has_the_http_shapes() {
        let mut decided = answer(Status::Outcome(Outcome::IgnoreDuplicate), Some(4));
        decided.original = Some(Original {
            outcome: Outcome::AcceptDelayed,
            correlation_id: "first".into(),
        });
        let v: serde_json::Value = serde_json::from_slice(&json(&decided)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"outcome": "ignore-duplicate", "reason": "r", "correlation_id": "c",
                "acknowledged_sequence": 4,
                "original": {"outcome": "accept-delayed", "correlation_id": "first"}})
        );
        let v: serde_json::Value =
            serde_json::from_slice(&json(&answer(Status::Unauthenticated, None))).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"code": "unauthenticated", "reason": "r", "correlation_id": "c"})
        );
        let v: serde_json::Value =
            serde_json::from_slice(&json(&answer(Status::Unavailable, None))).unwrap();
        assert_eq!(v["code"], "outcome-unknown");
        assert_eq!(http_status(&answer(Status::TooLarge, None)), 413);
    }
}
