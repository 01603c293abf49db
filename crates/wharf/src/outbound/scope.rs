//! Who an outbound envelope is from and where it goes: [`Scope`] and [`Destination`], with
//! their pure checks.
//!
//! Owns: the bounds of a scope (the envelope's identity rule) and of a destination URL. Must not
//! know: SQL, keys, or how a destination is reached (the network sender resolves, guards and
//! calls it; this module only refuses what must never be stored).

use wharf_core::envelope::is_identity;

use super::error::Error;

/// Longest destination URL, in bytes. An ingest URL is
/// `https://host/v1/tenants/{≤128}/projects/{≤128}/envelopes`; 2 KiB leaves room for any host
/// and path prefix and is the length most HTTP stacks promise to carry.
pub const DESTINATION_URL_BYTES_MAX: usize = 2048;

/// The (tenant, project) an envelope is emitted in: its `tenant_id` and `project_id`, the scope
/// of the signing key that signs it, and of the receiver's stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// The tenant, `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
    pub tenant: String,
    /// The project, same rule.
    pub project: String,
}

impl Scope {
    /// A scope (checked when used).
    pub fn new(tenant: impl Into<String>, project: impl Into<String>) -> Scope {
        Scope {
            tenant: tenant.into(),
            project: project.into(),
        }
    }

    /// Both parts must be envelope identities: the receiver refuses anything else, so wharf
    /// never signs or stores it.
    pub fn validate(&self) -> Result<(), Error> {
        check_scope(&self.tenant, &self.project)
    }
}

pub(crate) fn check_scope(tenant: &str, project: &str) -> Result<(), Error> {
    for (field, value) in [("tenant", tenant), ("project", project)] {
        if !is_identity(value) {
            return Err(Error::invalid(
                field,
                "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
            ));
        }
    }
    Ok(())
}

/// Where an envelope is delivered: the receiver's ingest URL, e.g.
/// `https://b.example/v1/tenants/acme/projects/web/envelopes`, or a JetStream subject on a NATS
/// server, `nats://host:4222/wharf.inbox.acme.web` (the path is the subject; the adapter
/// publishes there).
///
/// The URL is part of the receiver stream's identity (its own producer sequence and lane), and
/// of the emit request's content: re-emitting a key to another URL is a conflict.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Destination {
    /// `http://`, `https://` or `nats://`, at most [`DESTINATION_URL_BYTES_MAX`] bytes, printable ASCII,
    /// no user info (credentials are deployment configuration, never stored in an action) and
    /// no fragment.
    pub url: String,
    /// Delivery attempts before the action is a dead letter; the `envelope` kind's default
    /// when `None`. Not part of the request's content: a re-emit with another value returns the
    /// original envelope and keeps the original action.
    pub max_attempts: Option<u32>,
}

impl Destination {
    /// A destination with the kind's default attempts.
    pub fn new(url: impl Into<String>) -> Destination {
        Destination {
            url: url.into(),
            max_attempts: None,
        }
    }

    /// Sets the attempts before the delivery is a dead letter.
    pub fn max_attempts(mut self, attempts: u32) -> Destination {
        self.max_attempts = Some(attempts);
        self
    }

    /// Checks the URL's shape. Whether its address may be called is the network sender's
    /// question, asked at every attempt (DNS answers change).
    pub fn validate(&self) -> Result<(), Error> {
        let url = self.url.as_str();
        if url.is_empty() || url.len() > DESTINATION_URL_BYTES_MAX {
            return Err(Error::invalid(
                "destination",
                format!("must be 1..={DESTINATION_URL_BYTES_MAX} bytes"),
            ));
        }
        if !url.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::invalid(
                "destination",
                "must be printable ASCII without spaces (percent-encode the rest)",
            ));
        }
        // Lowercase schemes only: the URL names a stream, and two spellings of one URL must not
        // be two streams with two sequence counters.
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .or_else(|| url.strip_prefix("nats://"))
            .ok_or_else(|| {
                Error::invalid(
                    "destination",
                    "must start with https://, http:// or nats://",
                )
            })?;
        let authority = rest.split(['/', '?']).next().unwrap_or("");
        if authority.is_empty() {
            return Err(Error::invalid("destination", "must name a host"));
        }
        if authority.contains('@') {
            return Err(Error::invalid(
                "destination",
                "must not carry user info; credentials belong in the sender's configuration",
            ));
        }
        if url.contains('#') {
            return Err(Error::invalid("destination", "must not have a fragment"));
        }
        if url.starts_with("nats://") {
            // A subject, one path segment: no wildcard (a publish to one would fail at every
            // attempt), no empty token, no query.
            let subject = rest.split_once('/').map_or("", |(_, s)| s);
            if subject.is_empty()
                || subject.contains(['/', '?', '*', '>'])
                || subject.split('.').any(str::is_empty)
            {
                return Err(Error::invalid(
                    "destination",
                    "a nats:// destination is nats://host:port/<subject>, a subject without wildcards",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations() {
        let check = |url: &str, ok: bool| {
            assert_eq!(Destination::new(url).validate().is_ok(), ok, "{url:?}");
        };
        check("nats://127.0.0.1:4222/wharf.inbox.acme.web", true);
        check("nats://127.0.0.1:4222/", false);
        check("nats://127.0.0.1:4222", false);
        check("nats://127.0.0.1:4222/wharf.*.acme.web", false);
        check("nats://127.0.0.1:4222/wharf.>", false);
        check("nats://127.0.0.1:4222/wharf..web", false);
        check("nats://127.0.0.1:4222/a/b", false);
        check("nats://u:p@127.0.0.1:4222/a", false);
        check("NATS://127.0.0.1:4222/a", false);
        check(
            "https://b.example/v1/tenants/acme/projects/web/envelopes",
            true,
        );
        check(
            "http://127.0.0.1:8080/v1/tenants/a/projects/p/envelopes",
            true,
        );
        check("http://[::1]:8080/x?y=z", true);
        check(
            &format!("https://h/{}", "a".repeat(DESTINATION_URL_BYTES_MAX - 10)),
            true,
        );
        check(
            &format!("https://h/{}", "a".repeat(DESTINATION_URL_BYTES_MAX - 9)),
            false,
        );
        check("", false);
        check("ftp://b.example/", false);
        check("HTTPS://b.example/", false);
        check("https://", false);
        check("https:///path", false);
        check("https://user:secret@b.example/", false);
        check("https://b.example/a#frag", false);
        check("https://b.example/a b", false);
        check("https://b.example/é", false);
        check("https://b.example/\n", false);
    }

    #[test]
    fn scopes() {
        let check = |t: &str, p: &str, ok: bool| {
            assert_eq!(Scope::new(t, p).validate().is_ok(), ok, "{t:?}/{p:?}");
        };
        check("acme", "web", true);
        check("a.b_c:d-e", "0", true);
        check(&"a".repeat(128), &"p".repeat(128), true);
        check(&"a".repeat(129), "web", false);
        check("", "web", false);
        check("acme", "", false);
        check("-acme", "web", false);
        check("acme", "w/eb", false);
    }
}
