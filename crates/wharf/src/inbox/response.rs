//! What an ingest request gets back: one [`Response`] (single endpoint) or one
//! [`BatchResponse`] (batch endpoint). Plain data; the HTTP layer turns it into JSON and a status
//! code with [`Status::http_status`].
//!
//! Must not know HTTP types: status codes are plain `u16`, so the library does not depend on a
//! web framework.

use wharf_core::inbox::Outcome;

/// What happened to a request as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// The envelope was decided; see the outcome. Acknowledged (committed) when the outcome is an
    /// accept or `ignore-duplicate`.
    Outcome(Outcome),
    /// The body is larger than the configured limit (413, `body-too-large`). Nothing audited:
    /// there is no verified tenant yet when the limit is checked. Also a batch of more
    /// envelopes than the identity limiter's burst (413, `batch-over-burst`): no wait would let
    /// it through, so it is not a 429; split it. Not audited, like every limiter answer.
    TooLarge,
    /// The peer or identity limiter refused the request (429, with `retry_after_s`). Not audited;
    /// nothing was taken from the identity's bucket, so a smaller batch may pass at once.
    RateLimited,
    /// The bearer credential is missing, malformed, unknown or revoked (401). Not audited: there
    /// is no verified tenant to audit into.
    Unauthenticated,
    /// A database failure (503). Nothing was acknowledged and nothing committed; retrying the
    /// same envelope is safe.
    Unavailable,
    /// Batch only: every envelope was decided in one committed transaction; each has its own
    /// outcome in [`BatchResponse::items`] (200).
    Decided,
}

impl Status {
    /// The stable code for responses: the outcome's public v1 term, or `payload-too-large`,
    /// `rate-limited`, `unauthenticated`, `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Outcome(outcome) => outcome.as_str(),
            Status::TooLarge => "payload-too-large",
            Status::RateLimited => "rate-limited",
            Status::Unauthenticated => "unauthenticated",
            Status::Unavailable => "unavailable",
            Status::Decided => "decided",
        }
    }

    /// The HTTP status code SPEC §3.5 and §4 give it.
    pub fn http_status(self) -> u16 {
        match self {
            // SPEC §3.5: the accepts and the duplicate are acknowledged (200); a replay
            // conflicts with what the stream already holds (409); the rest are refused as
            // unprocessable (422). The core knows outcomes, not status codes.
            Status::Outcome(
                Outcome::AcceptDelayed | Outcome::AcceptReordered | Outcome::IgnoreDuplicate,
            ) => 200,
            Status::Outcome(Outcome::RefuseReplay) => 409,
            Status::Outcome(Outcome::RefuseIncompatible | Outcome::RefuseTampered) => 422,
            Status::TooLarge => 413,
            Status::RateLimited => 429,
            Status::Unauthenticated => 401,
            Status::Unavailable => 503,
            Status::Decided => 200,
        }
    }

    /// The outcome, when the envelope was decided.
    pub fn outcome(self) -> Option<Outcome> {
        match self {
            Status::Outcome(outcome) => Some(outcome),
            _ => None,
        }
    }
}

/// The original acceptance a duplicate answers like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Original {
    /// `accept-delayed` or `accept-reordered`.
    pub outcome: Outcome,
    /// The correlation id of the request that accepted it.
    pub correlation_id: String,
}

/// The answer to one request (or, inside a [`BatchResponse`], the answer's shared parts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// What happened.
    pub status: Status,
    /// The stable reason: one of `wharf_core::inbox::reason` for a decided envelope (the
    /// `signature-*` family folded into `signature`, which the audit keeps distinct), or
    /// `body-too-large`, `batch-over-burst`, `peer-limited`, `identity-limited`,
    /// `unauthenticated`, `database`.
    pub reason: &'static str,
    /// This request's correlation id (also in its audit row).
    pub correlation_id: String,
    /// The stream's contiguous cursor after this request, for every authenticated answer that
    /// reached the database; `None` for 401, 413, 429 and 503.
    pub acknowledged_sequence: Option<u64>,
    /// For 429: whole seconds to wait before retrying.
    pub retry_after_s: Option<u64>,
    /// For `ignore-duplicate`: the acceptance it repeats.
    pub original: Option<Original>,
}

impl Response {
    pub(crate) fn bare(status: Status, reason: &'static str, correlation_id: String) -> Response {
        Response {
            status,
            reason,
            correlation_id,
            acknowledged_sequence: None,
            retry_after_s: None,
            original: None,
        }
    }

    /// Whether the envelope is now durably held (accepted now or before): the producer may
    /// forget it.
    pub fn is_acknowledged(&self) -> bool {
        self.status.outcome().is_some_and(Outcome::is_acknowledged)
    }
}

/// One envelope's answer inside a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemResponse {
    /// The envelope's position in the request, from 0.
    pub index: usize,
    /// Its outcome.
    pub outcome: Outcome,
    /// The stable reason.
    pub reason: &'static str,
    /// Its event id, when it decoded far enough to have one.
    pub event_id: Option<String>,
    /// Its sequence, when it decoded far enough to have one.
    pub producer_sequence: Option<u64>,
    /// For `ignore-duplicate`: the acceptance it repeats.
    pub original: Option<Original>,
}

/// The answer to a batch request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchResponse {
    /// For the request as a whole. [`Status::Decided`] when every envelope was decided (one
    /// transaction committed) and `items` holds one answer per envelope. Otherwise (401, 413,
    /// 429, 503, or an authenticated batch that is not a well-formed list of envelopes, which
    /// is refused and audited as one decision) `items` is empty and nothing was acknowledged.
    pub head: Response,
    /// One answer per envelope, in request order.
    pub items: Vec<ItemResponse>,
}

impl BatchResponse {
    /// The HTTP status for the whole request.
    pub fn http_status(&self) -> u16 {
        self.head.status.http_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status table of SPEC §3.5 and §4, written out: every outcome and every
    /// request-level answer.
    #[test]
    fn every_status_has_its_http_status() {
        let table = [
            (Status::Outcome(Outcome::AcceptDelayed), 200),
            (Status::Outcome(Outcome::AcceptReordered), 200),
            (Status::Outcome(Outcome::IgnoreDuplicate), 200),
            (Status::Outcome(Outcome::RefuseReplay), 409),
            (Status::Outcome(Outcome::RefuseIncompatible), 422),
            (Status::Outcome(Outcome::RefuseTampered), 422),
            (Status::TooLarge, 413),
            (Status::RateLimited, 429),
            (Status::Unauthenticated, 401),
            (Status::Unavailable, 503),
            (Status::Decided, 200),
        ];
        for (status, code) in table {
            assert_eq!(status.http_status(), code, "{status:?}");
        }
        assert_eq!(
            table.len(),
            Outcome::ALL.len() + 5,
            "every outcome is listed"
        );
    }
}
