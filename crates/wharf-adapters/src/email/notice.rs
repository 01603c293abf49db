//! Notices: each kind of email an application sends is one [`Notice`], which turns a stored
//! event into a [`Draft`] from the current state of the world.
//!
//! Owns: the [`Notice`] trait, its error, the stored payload shape (`{"notice", "event"}`) and
//! the built-in [`MessageNotice`]. Must not know: transports, Message-IDs, the suppression list
//! (the adapter checks every prepared recipient itself, so no notice can forget to) or the
//! outbox's lifecycle.
//!
//! Why the payload holds the event and not the message: the message is prepared again before
//! every attempt, so a retry an hour later reads the recipient's address, name and role as they
//! are then. Someone who unsubscribed, lost the address or lost the role that made them a
//! recipient is not written to by an old rendering of the message.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgConnection;
use wharf::outbox::ErrorCode;

use super::message::{Draft, Recipient, check};

/// One kind of email. Register it with
/// [`EmailAdapterBuilder::notice`](super::EmailAdapterBuilder::notice).
///
/// A notice is called at enqueue, in the application's transaction (so it sees the rows that
/// transaction wrote), and again before every attempt, on a pooled connection outside any
/// transaction. It must be a pure function of the event and the database: no provider calls,
/// no writes.
#[async_trait]
pub trait Notice: Send + Sync + 'static {
    /// The name stored in every payload, `[a-z0-9_.-]{1,64}`. Renaming a notice strands the
    /// emails queued under the old name (they retry, then fail), so treat it like a table name.
    fn name(&self) -> &'static str;

    /// A shape check of the event without IO, run inside every enqueue (also the generic
    /// `POST /v1/actions` path, which cannot run [`prepare`](Notice::prepare)). Keep the reason
    /// short and free of event content.
    fn validate(&self, event: &Value) -> Result<(), String> {
        let _ = event;
        Ok(())
    }

    /// The message for this event, now. Return [`NoticeError::Withdrawn`] when nobody should
    /// receive it any more (the recipient vanished or lost the role): the attempt then ends
    /// CANCELLED with that code, and the relay is never contacted.
    ///
    /// `conn` is for reading: at enqueue it is the caller's transaction; before an attempt it
    /// is the attempt's `READ ONLY` transaction ([`wharf::outbox::Attempt::read_only`]), where
    /// PostgreSQL refuses any write.
    async fn prepare(&self, conn: &mut PgConnection, event: &Value) -> Result<Draft, NoticeError>;
}

/// Why a notice prepared no message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NoticeError {
    /// The event cannot make a message (malformed, or it names something that never existed).
    /// At enqueue the request is refused; before an attempt the action ends FAILED /
    /// `notice_event_invalid`. Retrying cannot help.
    #[error("invalid event: {0}")]
    Invalid(String),
    /// Nobody should receive it now: the recipient unsubscribed, vanished, or lost the address
    /// or role. At enqueue nothing is enqueued; before an attempt the action ends CANCELLED with
    /// this code. Not an error of the event: the same event may be wanted again later.
    #[error("withdrawn: {0}")]
    Withdrawn(ErrorCode),
    /// A look-up failed. At enqueue the error is returned; before an attempt it is a Retry with
    /// `notice_lookup_failed` (the relay was not contacted).
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The stored payload of an `email` action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoticePayload {
    /// The notice's name.
    pub(crate) notice: String,
    /// Its event.
    pub(crate) event: Value,
}

impl NoticePayload {
    pub(crate) fn parse(payload: &Value) -> Result<NoticePayload, String> {
        NoticePayload::deserialize(payload)
            .map_err(|_| "the payload must be {\"notice\": name, \"event\": {…}}".to_owned())
    }
}

/// The built-in notice `message`: a plain message whose recipient and content are in the
/// event itself. For operators and simple applications; richer notices read their content from
/// the application's tables by id.
///
/// ```json
/// {"to": "ada@example.com", "name": "Ada", "subject": "Hello", "text": "…", "html": "<p>…</p>"}
/// ```
///
/// `name` and `html` are optional; no other field is allowed. Like every notice it is subject
/// to the suppression list.
#[derive(Debug, Clone, Copy, Default)]
pub struct MessageNotice;

/// The event of [`MessageNotice`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageEvent {
    /// The recipient's address.
    pub to: String,
    /// The recipient's display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The subject.
    pub subject: String,
    /// The plain-text body.
    pub text: String,
    /// An HTML alternative.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
}

impl MessageNotice {
    /// The notice's name.
    pub const NAME: &'static str = "message";

    fn draft(event: &Value) -> Result<Draft, String> {
        let e = MessageEvent::deserialize(event).map_err(|_| {
            "a message event has to, subject, text and optionally name, html".to_owned()
        })?;
        let draft = Draft {
            to: Recipient {
                address: e.to,
                name: e.name,
            },
            subject: e.subject,
            text: e.text,
            html: e.html,
        };
        check(&draft).map_err(|e| e.to_string())?;
        Ok(draft)
    }
}

#[async_trait]
impl Notice for MessageNotice {
    fn name(&self) -> &'static str {
        MessageNotice::NAME
    }

    fn validate(&self, event: &Value) -> Result<(), String> {
        MessageNotice::draft(event).map(|_| ())
    }

    async fn prepare(&self, _conn: &mut PgConnection, event: &Value) -> Result<Draft, NoticeError> {
        MessageNotice::draft(event).map_err(NoticeError::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn message_events_are_closed_and_checked() {
        let n = MessageNotice;
        let check = |event: Value, ok: bool| assert_eq!(n.validate(&event).is_ok(), ok, "{event}");
        check(
            json!({"to": "a@example.com", "subject": "s", "text": "t"}),
            true,
        );
        check(
            json!({"to": "a@example.com", "name": "A", "subject": "s", "text": "t", "html": "<p>t</p>"}),
            true,
        );
        check(json!({"to": "a@example.com", "subject": "s"}), false);
        check(
            json!({"to": "a@example.com", "subject": "s", "text": "t", "bcc": "b@example.com"}),
            false,
        );
        check(json!({"to": "nobody", "subject": "s", "text": "t"}), false);
        check(
            json!({"to": "a@example.com", "subject": "", "text": "t"}),
            false,
        );
        check(
            json!({"to": "a@example.com", "subject": "a\nb", "text": "t"}),
            false,
        );
        check(json!(["a@example.com"]), false);
    }

    #[test]
    fn payloads_are_closed() {
        assert!(NoticePayload::parse(&json!({"notice": "message", "event": {}})).is_ok());
        assert!(NoticePayload::parse(&json!({"notice": "message"})).is_err());
        assert!(NoticePayload::parse(&json!({"notice": "m", "event": {}, "x": 1})).is_err());
        assert!(NoticePayload::parse(&json!("message")).is_err());
    }
}
