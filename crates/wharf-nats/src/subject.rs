//! Subject patterns: where the tenant and project of a JetStream message come from.
//!
//! Owns: the pattern syntax (`wharf.inbox.{tenant}.{project}`: dot-separated tokens, each a
//! literal or exactly one of the two placeholders, each placeholder once), the consumer's
//! filter subject it implies (placeholders become `*`), and reading a message's subject back
//! into a [`Route`]. Must not know: what a valid tenant is (the inbox checks the route it is
//! given, so a subject whose tokens are not identities is refused as `route` and audited, like
//! an HTTP path with a bad tenant).
//!
//! A NATS subject token cannot hold a `.`, so a tenant or project whose id contains a dot
//! cannot be reached over JetStream; such a producer uses HTTP.

use wharf::inbox::Route;

use crate::error::Error;

/// Longest pattern, in bytes (NATS subjects are short; this bounds the configuration).
pub const PATTERN_BYTES_MAX: usize = 256;

/// Most tokens in a pattern.
pub const PATTERN_TOKENS_MAX: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(String),
    Tenant,
    Project,
}

/// A parsed subject pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectPattern {
    tokens: Vec<Token>,
}

impl SubjectPattern {
    /// Parses `pattern`; refuses an empty token, a wildcard, whitespace, a placeholder that is
    /// missing or repeated, or a placeholder mixed with other text in one token.
    pub fn parse(pattern: &str) -> Result<SubjectPattern, Error> {
        let bad = |why: &str| Error::config("subjects", format!("{pattern:?}: {why}"));
        if pattern.is_empty() || pattern.len() > PATTERN_BYTES_MAX {
            return Err(bad(&format!("must be 1..={PATTERN_BYTES_MAX} bytes")));
        }
        let mut tokens = Vec::new();
        for raw in pattern.split('.') {
            let token = match raw {
                "{tenant}" => Token::Tenant,
                "{project}" => Token::Project,
                "" => return Err(bad("has an empty token")),
                t if t.contains(['{', '}', '*', '>']) || t.chars().any(char::is_whitespace) => {
                    return Err(bad(
                        "a token is a literal or exactly {tenant} or {project}; no wildcards",
                    ));
                }
                t => Token::Literal(t.to_owned()),
            };
            tokens.push(token);
        }
        if tokens.len() > PATTERN_TOKENS_MAX {
            return Err(bad(&format!("more than {PATTERN_TOKENS_MAX} tokens")));
        }
        let count = |t: &Token| tokens.iter().filter(|x| *x == t).count();
        if count(&Token::Tenant) != 1 || count(&Token::Project) != 1 {
            return Err(bad("needs {tenant} and {project} once each"));
        }
        Ok(SubjectPattern { tokens })
    }

    /// The consumer's filter subject: the pattern with each placeholder as `*`.
    pub fn filter(&self) -> String {
        self.tokens
            .iter()
            .map(|t| match t {
                Token::Literal(l) => l.as_str(),
                Token::Tenant | Token::Project => "*",
            })
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The subject a producer publishes to for (`tenant`, `project`).
    pub fn subject(&self, tenant: &str, project: &str) -> String {
        self.tokens
            .iter()
            .map(|t| match t {
                Token::Literal(l) => l.as_str(),
                Token::Tenant => tenant,
                Token::Project => project,
            })
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The route a message's subject names. A subject of another shape (the consumer's filter
    /// only delivers matching ones, so this is a broker misconfiguration) gives an empty route,
    /// which the inbox refuses as `route` after authentication, audited.
    pub fn route(&self, subject: &str) -> Route {
        let parts: Vec<&str> = subject.split('.').collect();
        if parts.len() != self.tokens.len() {
            return Route::new("", "");
        }
        let (mut tenant, mut project) = ("", "");
        for (token, part) in self.tokens.iter().zip(&parts) {
            match token {
                Token::Literal(l) if l != part => return Route::new("", ""),
                Token::Literal(_) => {}
                Token::Tenant => tenant = part,
                Token::Project => project = part,
            }
        }
        Route::new(tenant, project)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_parse_or_are_refused() {
        let check = |p: &str, ok: bool| assert_eq!(SubjectPattern::parse(p).is_ok(), ok, "{p}");
        check("wharf.inbox.{tenant}.{project}", true);
        check("{project}.{tenant}", true);
        check("wharf.inbox.{tenant}", false);
        check("wharf.{tenant}.{tenant}.{project}", false);
        check("wharf..{tenant}.{project}", false);
        check("wharf.*.{tenant}.{project}", false);
        check("wharf.>.{tenant}.{project}", false);
        check("wharf.x{tenant}.{project}", false);
        check("wh arf.{tenant}.{project}", false);
        check("", false);
        check(
            &format!("{}.{{tenant}}.{{project}}", "a".repeat(PATTERN_BYTES_MAX)),
            false,
        );
        check(&format!("{}{{tenant}}.{{project}}", "a.".repeat(14)), true);
        check(&format!("{}{{tenant}}.{{project}}", "a.".repeat(15)), false);
    }

    #[test]
    fn subjects_become_routes() {
        let p = SubjectPattern::parse("wharf.inbox.{tenant}.{project}").unwrap();
        assert_eq!(p.filter(), "wharf.inbox.*.*");
        assert_eq!(p.subject("acme", "web"), "wharf.inbox.acme.web");
        let check = |s: &str, t: &str, pr: &str| assert_eq!(p.route(s), Route::new(t, pr), "{s}");
        check("wharf.inbox.acme.web", "acme", "web");
        check("wharf.inbox.acme", "", "");
        check("wharf.inbox.acme.web.x", "", "");
        check("other.inbox.acme.web", "", "");
        let reversed = SubjectPattern::parse("{project}.in.{tenant}").unwrap();
        assert_eq!(reversed.route("web.in.acme"), Route::new("acme", "web"));
    }
}
