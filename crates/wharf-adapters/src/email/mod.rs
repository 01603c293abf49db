//! The `email` kind: the only code in wharf that talks SMTP.
//!
//! An application records *that* someone should be told something (a [`Notice`] and its event)
//! in the transaction that makes the change; the executor later prepares the message from the
//! event, as things are then, and hands it to the relay once at most.
//!
//! ```no_run
//! # async fn example(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use wharf::outbox::{Executor, ExecutorConfig, Registry};
//! use wharf_adapters::email::{EmailAdapter, EmailConfig, MessageNotice};
//!
//! let email = Arc::new(
//!     EmailAdapter::builder()
//!         .config(EmailConfig::default()) // no relay: .eml files
//!         .mail_dir("./.wharf/mail")
//!         .notice(Arc::new(MessageNotice))
//!         .build()?,
//! );
//! let mut registry = Registry::new();
//! registry.register(email.clone())?;
//! let registry = Arc::new(registry);
//!
//! let mut tx = pool.begin().await?;
//! let event = serde_json::json!({"to": "ada@example.com", "subject": "Hi", "text": "Hello"});
//! let request = EmailAdapter::request(MessageNotice::NAME, event, "welcome:ada");
//! email.enqueue(&mut tx, &registry, request).await?;
//! tx.commit().await?;
//!
//! Executor::new(pool, registry, ExecutorConfig::default())?.drain().await?;
//! # Ok(()) }
//! ```
//!
//! - [`EmailConfig`]: the `[email]` table (relay, TLS, login, timeouts, From, Message-ID
//!   domain). No relay ⇒ one `.eml` file per message in the mail directory.
//! - [`Notice`]: each kind of email; prepares a [`Draft`] from the stored event at enqueue and
//!   again before every attempt. [`MessageNotice`] is the built-in one.
//! - [`suppress`] / [`unsuppress`]: the opt-out list every notice is checked against; a
//!   suppressed recipient's attempt ends CANCELLED / `recipient_suppressed` without contacting
//!   the relay.
//! - [`message_id`]: the stable Message-ID, from the idempotency key.
//! - The SMTP outcome rules are in the `smtp` module's docs: retry only what the relay provably
//!   did not take; 5xx is final; anything unclear after the body went out is Uncertain.
//!
//! Must not know: how actions are claimed, fenced or completed (the outbox's executor does
//! that), HTTP, or the CLI.

mod config;
mod error;
mod file;
mod message;
mod notice;
mod smtp;
mod store;
mod suppression;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgPool};
use tokio::time::Instant;
use wharf::outbox::{
    ActionRequest, Adapter, Attempt, Backoff, Enqueued, ErrorCode, KindSpec, Outcome, Registry,
};

pub use config::{CALL_TIMEOUT_MS_MIN, EmailConfig, STEP_TIMEOUT_MS_MAX, TlsMode};
pub use error::Error;
pub use message::{
    BODY_BYTES_MAX, Draft, DraftError, NAME_BYTES_MAX, Recipient, SUBJECT_BYTES_MAX, is_dot_atom,
    message_id,
};
pub use notice::{MessageEvent, MessageNotice, Notice, NoticeError};
pub use suppression::{is_suppressed, suppress, unsuppress};

use config::{Settings, Transport};
use message::Rendered;
use notice::NoticePayload;

/// The kind's name.
pub const KIND: &str = "email";

/// Attempts when the request does not say. With [`BACKOFF`] that rides out about three hours
/// of relay trouble; a notice older than that is usually stale, and the operator sees the
/// FAILED action.
pub const MAX_ATTEMPTS_DEFAULT: u32 = 10;

/// 30 s, doubling, capped at an hour, ±20 %: a relay restart is over by the second attempt,
/// and a long outage costs one connection an hour.
pub const BACKOFF: Backoff = Backoff {
    base_ms: 30_000,
    factor: 2,
    cap_ms: 60 * 60 * 1_000,
    jitter_percent: 20,
};

/// Time kept back from the kind's call timeout, so the adapter returns its own answer (and
/// says QUIT) before the executor cuts the call off: a cut-off after the fence is recorded as
/// Uncertain, even for a message the relay had already accepted.
const CALL_SLACK_MS: u64 = 2_000;

/// Most notices one adapter holds. Notices are code, registered at start-up; the bound only
/// catches a registration loop gone wrong.
pub const NOTICES_MAX: usize = 1_000;

/// A recipient on the suppression list.
pub const RECIPIENT_SUPPRESSED: ErrorCode = ErrorCode::from_static("recipient_suppressed");
/// The payload is not `{"notice", "event"}` (written around `enqueue`'s checks).
pub const PAYLOAD_INVALID: ErrorCode = ErrorCode::from_static("payload_invalid");
/// The payload names a notice this process does not have. Retried, not failed: during a
/// rolling deploy an older replica may claim an email of a notice only newer ones know.
pub const NOTICE_UNREGISTERED: ErrorCode = ErrorCode::from_static("notice_unregistered");
/// The notice refused the event, or prepared a malformed message.
pub const NOTICE_EVENT_INVALID: ErrorCode = ErrorCode::from_static("notice_event_invalid");
/// The notice's look-up failed (the database); the relay was not contacted.
pub const NOTICE_LOOKUP_FAILED: ErrorCode = ErrorCode::from_static("notice_lookup_failed");
/// Preparing the message took the whole call timeout; the relay was not contacted.
pub const NOTICE_TIMEOUT: ErrorCode = ErrorCode::from_static("notice_timeout");
/// The `.eml` file could not be written. Safe to retry: the file name is fixed by the key.
pub const FILE_WRITE_FAILED: ErrorCode = ErrorCode::from_static("file_write_failed");

/// Sets up an [`EmailAdapter`].
#[derive(Default)]
pub struct EmailAdapterBuilder {
    config: EmailConfig,
    mail_dir: Option<PathBuf>,
    notices: Vec<Arc<dyn Notice>>,
}

impl EmailAdapterBuilder {
    /// The `[email]` configuration (default: no relay, `.eml` files).
    pub fn config(mut self, config: EmailConfig) -> Self {
        self.config = config;
        self
    }

    /// Where the file transport writes when no relay is configured (`<data-dir>/mail`).
    pub fn mail_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.mail_dir = Some(dir.into());
        self
    }

    /// Registers a notice. Names must be unique.
    pub fn notice(mut self, notice: Arc<dyn Notice>) -> Self {
        self.notices.push(notice);
        self
    }

    /// Checks the configuration and the notices.
    pub fn build(self) -> Result<EmailAdapter, Error> {
        let settings = self.config.settings(self.mail_dir)?;
        if self.notices.len() > NOTICES_MAX {
            return Err(Error::Config(format!("at most {NOTICES_MAX} notices")));
        }
        let mut notices = BTreeMap::new();
        for notice in self.notices {
            let name = notice.name();
            if ErrorCode::new(name).is_err() {
                return Err(Error::Config(format!(
                    "notice name {name:?} must be 1..=64 bytes of [a-z0-9_.-]"
                )));
            }
            if notices.insert(name, notice).is_some() {
                return Err(Error::Config(format!("two notices are named {name:?}")));
            }
        }
        Ok(EmailAdapter { settings, notices })
    }
}

/// The adapter of the `email` kind. Register it (as `Arc`) with the outbox's
/// [`Registry`], and keep a clone to [`enqueue`](EmailAdapter::enqueue) with.
pub struct EmailAdapter {
    settings: Settings,
    notices: BTreeMap<&'static str, Arc<dyn Notice>>,
}

impl std::fmt::Debug for EmailAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailAdapter")
            .field("transport", &self.settings.transport)
            .field("notices", &self.notices.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// What [`EmailAdapter::enqueue`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EmailEnqueued {
    /// The email is an action (new, or the existing one for the same key and content).
    Enqueued(Enqueued),
    /// The notice prepared no message for anyone (the recipient is suppressed, or the notice
    /// said so): nothing was written. Not an error, so the application's transaction can go on.
    Withdrawn(ErrorCode),
}

/// Why a prepared message is not sent.
enum Unsent {
    Withdrawn(ErrorCode),
    Invalid { notice: String, reason: String },
    Database(sqlx::Error),
}

impl EmailAdapter {
    /// Starts a builder.
    pub fn builder() -> EmailAdapterBuilder {
        EmailAdapterBuilder::default()
    }

    /// The outbox request for one email: kind `email`, payload `{"notice", "event"}`, a lane of
    /// its own (derived from the key, so emails run in parallel). Set the tenant, subject
    /// account, expiry or a shared lane on it before [`enqueue`](EmailAdapter::enqueue): use
    /// one lane per recipient when their emails must arrive in order.
    pub fn request(
        notice: &str,
        event: Value,
        idempotency_key: impl Into<String>,
    ) -> ActionRequest {
        let key = idempotency_key.into();
        // A hash, not the key: the lane must stay within its 256 bytes whatever the key is.
        let lane = format!(
            "email:{}",
            &hex::encode(Sha256::digest(key.as_bytes()))[..32]
        );
        let payload = serde_json::json!({ "notice": notice, "event": event });
        ActionRequest::new(KIND, lane, key, payload)
    }

    /// Enqueues one email in the caller's transaction, after preparing it once: a malformed
    /// event or a notice that cannot build a message is refused now, with nothing written; a
    /// recipient who should not get it (suppressed, or withdrawn by the notice) gives
    /// [`EmailEnqueued::Withdrawn`], also with nothing written. Otherwise the outbox's
    /// [`enqueue`](wharf::outbox::enqueue) rules apply (idempotency by key and content).
    pub async fn enqueue(
        &self,
        conn: &mut PgConnection,
        registry: &Registry,
        request: ActionRequest,
    ) -> Result<EmailEnqueued, Error> {
        if request.kind != KIND {
            return Err(Error::UnknownNotice(format!(
                "the request's kind is {:?}, not {KIND:?}",
                request.kind
            )));
        }
        let payload = NoticePayload::parse(&request.payload).map_err(Error::UnknownNotice)?;
        let notice = self.notice(&payload.notice)?;
        notice
            .validate(&payload.event)
            .map_err(|reason| Error::InvalidEvent {
                notice: payload.notice.clone(),
                reason,
            })?;
        match self
            .prepare(
                &mut *conn,
                notice.as_ref(),
                &payload,
                &request.idempotency_key,
            )
            .await
        {
            Ok(_) => {}
            Err(Unsent::Withdrawn(code)) => return Ok(EmailEnqueued::Withdrawn(code)),
            Err(Unsent::Invalid { notice, reason }) => {
                return Err(Error::InvalidEvent { notice, reason });
            }
            Err(Unsent::Database(e)) => return Err(Error::Database(e)),
        }
        let enqueued = wharf::outbox::enqueue(conn, registry, request).await?;
        Ok(EmailEnqueued::Enqueued(enqueued))
    }

    /// [`enqueue`](EmailAdapter::enqueue) in a transaction of its own.
    pub async fn enqueue_in(
        &self,
        pool: &PgPool,
        registry: &Registry,
        request: ActionRequest,
    ) -> Result<EmailEnqueued, Error> {
        let mut tx = pool.begin().await?;
        let out = self.enqueue(&mut tx, registry, request).await?;
        tx.commit().await?;
        Ok(out)
    }

    /// The registered notice names.
    pub fn notices(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.notices.keys().copied()
    }

    /// Whether mail goes to a relay (otherwise to `.eml` files).
    pub fn has_relay(&self) -> bool {
        matches!(self.settings.transport, Transport::Smtp(_))
    }

    fn notice(&self, name: &str) -> Result<&Arc<dyn Notice>, Error> {
        self.notices
            .get(name)
            .ok_or_else(|| Error::UnknownNotice(format!("no notice is named {name:?}")))
    }

    /// Prepares the message now: the notice's draft, its checks, the suppression list, and
    /// the rendering with the Message-ID of `key`.
    async fn prepare(
        &self,
        conn: &mut PgConnection,
        notice: &dyn Notice,
        payload: &NoticePayload,
        key: &str,
    ) -> Result<Rendered, Unsent> {
        let invalid = |reason: String| Unsent::Invalid {
            notice: payload.notice.clone(),
            reason,
        };
        let draft = match notice.prepare(&mut *conn, &payload.event).await {
            Ok(draft) => draft,
            Err(NoticeError::Invalid(reason)) => return Err(invalid(reason)),
            Err(NoticeError::Withdrawn(code)) => return Err(Unsent::Withdrawn(code)),
            Err(NoticeError::Database(e)) => return Err(Unsent::Database(e)),
        };
        let id = message_id(key, &self.settings.message_id_domain);
        let rendered =
            message::render(&draft, &self.settings.from, id).map_err(|e| invalid(e.to_string()))?;
        match suppression::is_suppressed(&mut *conn, &draft.to.address).await {
            Ok(false) => Ok(rendered),
            Ok(true) => Err(Unsent::Withdrawn(RECIPIENT_SUPPRESSED)),
            Err(Error::Database(e)) => Err(Unsent::Database(e)),
            // The address parsed in `render`, so the suppression digest cannot refuse it.
            Err(e) => Err(invalid(e.to_string())),
        }
    }

    /// Prepares before an attempt, on a pooled connection outside any transaction.
    /// [`prepare`](Self::prepare) on the attempt's read-only connection, given back before the
    /// relay is contacted.
    async fn prepare_for_attempt(
        &self,
        attempt: &Attempt,
        notice: &dyn Notice,
        payload: &NoticePayload,
    ) -> Result<Rendered, Unsent> {
        let mut conn = attempt.read_only().await.map_err(Unsent::Database)?;
        self.prepare(&mut conn, notice, payload, attempt.idempotency_key())
            .await
    }
}

#[async_trait]
impl Adapter for EmailAdapter {
    fn spec(&self) -> KindSpec {
        KindSpec {
            name: KIND,
            // SMTP has no way to ask a relay whether it already holds a message.
            at_most_once: true,
            // An email to an account belongs to no tenant.
            instance_level: true,
            max_attempts_default: MAX_ATTEMPTS_DEFAULT,
            backoff: BACKOFF,
            call_timeout_ms: self.settings.call_timeout_ms,
        }
    }

    fn validate(&self, payload: &Value) -> Result<(), String> {
        let payload = NoticePayload::parse(payload)?;
        let notice = self
            .notices
            .get(payload.notice.as_str())
            .ok_or_else(|| format!("no notice is named {:?}", payload.notice))?;
        notice.validate(&payload.event)
    }

    async fn execute(&self, attempt: &mut Attempt) -> Outcome {
        let budget = attempt
            .call_timeout()
            .saturating_sub(Duration::from_millis(CALL_SLACK_MS));
        let deadline = Instant::now() + budget;
        let payload = match NoticePayload::parse(attempt.payload()) {
            Ok(p) => p,
            Err(_) => {
                return Outcome::Failed {
                    code: PAYLOAD_INVALID,
                };
            }
        };
        let Some(notice) = self.notices.get(payload.notice.as_str()) else {
            return Outcome::Retry {
                after: None,
                code: NOTICE_UNREGISTERED,
            };
        };
        let prepared = tokio::time::timeout_at(
            deadline,
            self.prepare_for_attempt(attempt, notice.as_ref(), &payload),
        )
        .await;
        let rendered = match prepared {
            Ok(Ok(rendered)) => rendered,
            Ok(Err(Unsent::Withdrawn(code))) => return Outcome::Cancelled { code },
            Ok(Err(Unsent::Invalid { .. })) => {
                return Outcome::Failed {
                    code: NOTICE_EVENT_INVALID,
                };
            }
            Ok(Err(Unsent::Database(_))) => {
                return Outcome::Retry {
                    after: None,
                    code: NOTICE_LOOKUP_FAILED,
                };
            }
            Err(_) => {
                return Outcome::Retry {
                    after: None,
                    code: NOTICE_TIMEOUT,
                };
            }
        };

        if let Err(refused) = attempt.fence().begin_write().await {
            tracing::debug!(action = attempt.action_id(), %refused, "email: fence refused");
            return Outcome::Abandoned;
        }
        match &self.settings.transport {
            Transport::Files(dir) => match file::write(dir, &rendered).await {
                Ok(_) => Outcome::Done {
                    readback_ref: Some(rendered.message_id),
                },
                Err(e) => {
                    tracing::warn!(action = attempt.action_id(), error = %e, "email: cannot write the .eml file");
                    Outcome::Retry {
                        after: None,
                        code: FILE_WRITE_FAILED,
                    }
                }
            },
            Transport::Smtp(relay) => match smtp::deliver(relay, &rendered, deadline).await {
                Ok(()) => Outcome::Done {
                    readback_ref: Some(rendered.message_id),
                },
                Err(stop) => smtp::classify(stop),
            },
        }
    }
}
