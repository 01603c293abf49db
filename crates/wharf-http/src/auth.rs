//! The operator token: the credential of the admin endpoints.
//!
//! Compared in constant time. With no token configured, every admin endpoint answers 401:
//! an unconfigured server is closed, not open.

use axum::http::HeaderMap;
use axum::http::StatusCode;

use crate::error::{ApiError, CorrelationId};

/// The configured operator token, if any.
#[derive(Clone, Default)]
pub struct OperatorToken(Option<String>);

impl std::fmt::Debug for OperatorToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "OperatorToken(set)"
        } else {
            "OperatorToken(unset)"
        })
    }
}

impl OperatorToken {
    /// A token; `None` or an empty string closes the admin endpoints.
    pub fn new(token: Option<String>) -> OperatorToken {
        OperatorToken(token.filter(|t| !t.is_empty()))
    }

    /// Whether the request's `Authorization: Bearer …` is the operator token.
    pub fn accepts(&self, headers: &HeaderMap) -> bool {
        let (Some(expected), Some(given)) = (&self.0, bearer(headers)) else {
            return false;
        };
        constant_time_eq(expected.as_bytes(), given.as_bytes())
    }

    /// Whether `given` (as typed into the console's sign-in form) is the token.
    pub fn matches(&self, given: &str) -> bool {
        match &self.0 {
            Some(expected) => constant_time_eq(expected.as_bytes(), given.as_bytes()),
            None => false,
        }
    }

    /// `Ok` when the request carries the operator token, else the 401 answer.
    pub fn require(
        &self,
        headers: &HeaderMap,
        correlation: &CorrelationId,
    ) -> Result<(), ApiError> {
        if self.accepts(headers) {
            Ok(())
        } else if self.0.is_none() {
            // The operator's first question on a fresh server; the answer says how to fix it.
            Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this server has no operator token configured, so its admin endpoints are \
                 closed: start it with WHARF_OPERATOR_TOKEN=<token> (or --operator-token, or \
                 [serve] operator_token in wharf.toml) and send Authorization: Bearer <token>",
                correlation,
            ))
        } else {
            Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid operator token is required",
                correlation,
            ))
        }
    }
}

/// The bearer credential of a request, if it has one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Equality whose time depends only on the lengths, never on where the bytes differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(axum::http::header::AUTHORIZATION, value.parse().unwrap());
        h
    }

    #[test]
    fn only_the_exact_token_is_accepted() {
        let token = OperatorToken::new(Some("s3cret".into()));
        let check = |value: &str, expected: bool| {
            assert_eq!(token.accepts(&headers(value)), expected, "{value}")
        };
        check("Bearer s3cret", true);
        check("bearer s3cret", true);
        check("Bearer s3cre", false);
        check("Bearer s3cret2", false);
        check("Basic s3cret", false);
        check("s3cret", false);
        assert!(!token.accepts(&HeaderMap::new()));
    }

    #[test]
    fn an_unset_or_empty_token_accepts_nobody() {
        for token in [
            OperatorToken::new(None),
            OperatorToken::new(Some(String::new())),
        ] {
            assert!(!token.accepts(&headers("Bearer ")));
            assert!(!token.accepts(&headers("Bearer x")));
        }
    }
}
