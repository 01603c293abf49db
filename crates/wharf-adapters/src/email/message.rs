//! What a notice prepares ([`Draft`]), the stable `Message-ID`, and the RFC 5322 bytes both
//! transports send.
//!
//! Owns: the draft's bounds, the Message-ID derivation and syntax, and rendering with lettre's
//! builder. Must not know: where the bytes go (SMTP or a file), the outbox, or any notice.

use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart};
use lettre::{Address, Message};
use sha2::{Digest, Sha256};

/// Longest subject, in bytes. Far above any real subject; a bound so a runaway template
/// cannot build a megabyte header.
pub const SUBJECT_BYTES_MAX: usize = 998;
/// Longest text or HTML body, in bytes. Notices render short messages; bigger content belongs
/// behind a link.
pub const BODY_BYTES_MAX: usize = 512 * 1024;
/// Longest display name, in bytes.
pub const NAME_BYTES_MAX: usize = 256;
/// Hex digits of the key's hash in a Message-ID: 128 bits, so two different keys share an id
/// with probability 2⁻¹²⁸ per pair, and the id stays short enough for every relay's logs.
const MESSAGE_ID_HEX_DIGITS: usize = 32;

/// Whom a message goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    /// The address, `local@domain`.
    pub address: String,
    /// A display name, if any.
    pub name: Option<String>,
}

impl Recipient {
    /// A recipient without a display name.
    pub fn address(address: impl Into<String>) -> Recipient {
        Recipient {
            address: address.into(),
            name: None,
        }
    }
}

/// A message as a notice prepared it: one recipient, a subject, a text body and optionally an
/// HTML alternative. The adapter adds From, Message-ID, Date and the transport details.
///
/// One recipient per action on purpose: suppression, erasure and "the person lost the role" are
/// all about one person, and a relay that refuses one of several recipients would leave the
/// action half done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    /// The recipient.
    pub to: Recipient,
    /// The subject (one line).
    pub subject: String,
    /// The plain-text body.
    pub text: String,
    /// An HTML alternative of the same content.
    pub html: Option<String>,
}

/// A draft that cannot be turned into a message. Retrying cannot help: the same event
/// prepares the same draft.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("draft: {0}")]
pub struct DraftError(pub String);

/// A message ready for a transport.
#[derive(Debug, Clone)]
pub(crate) struct Rendered {
    /// The Message-ID header value, with its angle brackets.
    pub(crate) message_id: String,
    /// The envelope sender (`MAIL FROM`).
    pub(crate) envelope_from: Address,
    /// The envelope recipient (`RCPT TO`).
    pub(crate) envelope_to: Address,
    /// The whole message, headers and body, CRLF line ends.
    pub(crate) bytes: Vec<u8>,
}

/// True for RFC 5322 `dot-atom-text`: `1*atext *("." 1*atext)`.
pub fn is_dot_atom(s: &str) -> bool {
    const SPECIALS: &[u8] = b"!#$%&'*+-/=?^_`{|}~";
    !s.is_empty()
        && s.split('.').all(|atom| {
            !atom.is_empty()
                && atom
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || SPECIALS.contains(&b))
        })
}

/// The Message-ID of the email with this idempotency key: `<32 hex digits@domain>`.
///
/// The same key always gives the same id, so the relay, the recipient's mail system and the
/// `.eml` file name all recognise a message across attempts. The key is hashed, not embedded:
/// keys may carry application identifiers that have no business in a header, and a hash always
/// fits the `dot-atom-text` syntax. The label in front of the key keeps this hash apart from
/// any other SHA-256 of the same key.
pub fn message_id(idempotency_key: &str, domain: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"wharf.email.message-id\n");
    hasher.update(idempotency_key.as_bytes());
    let hex = hex::encode(hasher.finalize());
    format!("<{}@{domain}>", &hex[..MESSAGE_ID_HEX_DIGITS])
}

fn one_line(field: &str, value: &str, max: usize) -> Result<(), DraftError> {
    if value.len() > max {
        return Err(DraftError(format!("{field} is longer than {max} bytes")));
    }
    if value.contains(['\r', '\n']) {
        return Err(DraftError(format!("{field} must be one line")));
    }
    Ok(())
}

/// Checks a draft's bounds and parses its recipient.
pub(crate) fn check(draft: &Draft) -> Result<Mailbox, DraftError> {
    let address: Address = draft
        .to
        .address
        .parse()
        .map_err(|_| DraftError("the recipient is not an email address".to_owned()))?;
    if let Some(name) = &draft.to.name {
        one_line("the recipient's name", name, NAME_BYTES_MAX)?;
    }
    if draft.subject.is_empty() {
        return Err(DraftError("the subject is empty".to_owned()));
    }
    one_line("the subject", &draft.subject, SUBJECT_BYTES_MAX)?;
    if draft.text.len() > BODY_BYTES_MAX {
        return Err(DraftError(format!(
            "the text is longer than {BODY_BYTES_MAX} bytes"
        )));
    }
    if draft
        .html
        .as_ref()
        .is_some_and(|h| h.len() > BODY_BYTES_MAX)
    {
        return Err(DraftError(format!(
            "the HTML is longer than {BODY_BYTES_MAX} bytes"
        )));
    }
    Ok(Mailbox::new(draft.to.name.clone(), address))
}

/// Renders a checked draft with its Message-ID.
pub(crate) fn render(
    draft: &Draft,
    from: &Mailbox,
    message_id: String,
) -> Result<Rendered, DraftError> {
    let to = check(draft)?;
    let builder = Message::builder()
        .from(from.clone())
        .to(to.clone())
        .subject(draft.subject.clone())
        .message_id(Some(message_id.clone()))
        // RFC 3834: tells auto-responders (vacation replies) not to answer a notice.
        .raw_header(HeaderValue::new(
            HeaderName::new_from_ascii_str("Auto-Submitted"),
            "auto-generated".to_owned(),
        ));
    let message = match &draft.html {
        None => builder
            .header(ContentType::TEXT_PLAIN)
            .body(draft.text.clone()),
        Some(html) => builder.multipart(MultiPart::alternative_plain_html(
            draft.text.clone(),
            html.clone(),
        )),
    }
    .map_err(|e| DraftError(format!("cannot build the message: {e}")))?;
    Ok(Rendered {
        message_id,
        envelope_from: from.email.clone(),
        envelope_to: to.email,
        bytes: message.formatted(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5322 §3.6.4 `msg-id = "<" id-left "@" id-right ">"`, with both sides `dot-atom-text`
    /// (the form this module emits; `no-fold-literal` on the right is never produced).
    fn is_msg_id(s: &str) -> bool {
        let Some(inner) = s.strip_prefix('<').and_then(|s| s.strip_suffix('>')) else {
            return false;
        };
        match inner.split_once('@') {
            Some((left, right)) => is_dot_atom(left) && is_dot_atom(right),
            None => false,
        }
    }

    #[test]
    fn message_ids_are_stable_distinct_and_well_formed() {
        let a = message_id("order-42:shipped", "wharf.local");
        assert_eq!(a, message_id("order-42:shipped", "wharf.local"));
        assert_ne!(a, message_id("order-42:shipped ", "wharf.local"));
        assert_ne!(a, message_id("order-43:shipped", "wharf.local"));
        assert_ne!(a, message_id("order-42:shipped", "example.com"));
        for key in ["k", "with space", "ünïcödé", "<>@\"\r\n", &"x".repeat(256)] {
            let id = message_id(key, "mail.example.com");
            assert!(is_msg_id(&id), "{id}");
            assert_eq!(
                id.len(),
                1 + MESSAGE_ID_HEX_DIGITS + 1 + "mail.example.com".len() + 1
            );
        }
        // Many keys, no collision in the prefix.
        let ids: std::collections::HashSet<_> = (0..10_000)
            .map(|i| message_id(&format!("key-{i}"), "d"))
            .collect();
        assert_eq!(ids.len(), 10_000);
    }

    #[test]
    fn the_msg_id_checker_itself_refuses_bad_ids() {
        let check = |s: &str, ok: bool| assert_eq!(is_msg_id(s), ok, "{s}");
        check("<a@b>", true);
        check("<a.b@c.d>", true);
        check("a@b", false);
        check("<a@>", false);
        check("<@b>", false);
        check("<a..b@c>", false);
        check("<a b@c>", false);
        check("<a@b@c>", false);
    }

    fn draft() -> Draft {
        Draft {
            to: Recipient {
                address: "ada@example.com".to_owned(),
                name: Some("Ada Lovelace".to_owned()),
            },
            subject: "Your report is ready".to_owned(),
            text: "Hello Ada,\r\n.\r\nA line with a lone dot above.".to_owned(),
            html: None,
        }
    }

    #[test]
    fn render_sets_headers_and_envelope() {
        let from: Mailbox = "wharf <noreply@example.com>".parse().unwrap();
        let id = message_id("k1", "example.com");
        let r = render(&draft(), &from, id.clone()).unwrap();
        let text = String::from_utf8(r.bytes).unwrap();
        assert!(text.contains(&format!("Message-ID: {id}\r\n")), "{text}");
        assert!(text.contains("Auto-Submitted: auto-generated\r\n"));
        assert!(text.contains("Subject: Your report is ready\r\n"));
        assert!(
            text.contains("To: \"Ada Lovelace\" <ada@example.com>\r\n"),
            "{text}"
        );
        assert!(text.contains("Date: "));
        assert_eq!(r.envelope_to.to_string(), "ada@example.com");
        assert_eq!(r.envelope_from.to_string(), "noreply@example.com");
    }

    #[test]
    fn render_refuses_bad_drafts() {
        let from: Mailbox = "w@example.com".parse().unwrap();
        let refused = |d: Draft| assert!(render(&d, &from, "<a@b>".to_owned()).is_err(), "{d:?}");
        refused(Draft {
            to: Recipient::address("not an address"),
            ..draft()
        });
        refused(Draft {
            subject: String::new(),
            ..draft()
        });
        refused(Draft {
            subject: "a\r\nBcc: x@example.com".to_owned(),
            ..draft()
        });
        refused(Draft {
            subject: "s".repeat(SUBJECT_BYTES_MAX + 1),
            ..draft()
        });
        refused(Draft {
            text: "t".repeat(BODY_BYTES_MAX + 1),
            ..draft()
        });
        refused(Draft {
            to: Recipient {
                address: "a@example.com".to_owned(),
                name: Some("x\ny".to_owned()),
            },
            ..draft()
        });
        let html = Draft {
            html: Some("<p>Hello</p>".to_owned()),
            ..draft()
        };
        let text =
            String::from_utf8(render(&html, &from, "<a@b>".to_owned()).unwrap().bytes).unwrap();
        assert!(text.contains("multipart/alternative"));
    }
}
