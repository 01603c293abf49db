//! wharf over NATS JetStream: the inbox's ingest consumer and the outbound envelope publisher.
//!
//! - [`JetStreamIngest`] reads a durable pull consumer and puts every message through the
//!   inbox's pipeline ([`wharf::inbox::Inbox::ingest_from`], the path HTTP's
//!   `ingest_correlated` takes),
//!   acknowledging only after the commit ([`ingest`] says in which order, and what is
//!   terminated or redelivered).
//! - [`Publisher`] publishes a signed envelope to a subject with `Nats-Msg-Id` = its event id
//!   and waits for the stream's acknowledgement (`wharf-adapters` uses it for `nats://`
//!   destinations of the `envelope` kind).
//!
//! # Quick start
//!
//! ```no_run
//! # async fn example(pool: sqlx::PgPool) -> Result<(), wharf_nats::Error> {
//! use std::sync::Arc;
//! use wharf::inbox::{Inbox, InboxConfig};
//! use wharf_nats::{JetStreamConfig, JetStreamIngest};
//!
//! let inbox = Arc::new(Inbox::new(pool, InboxConfig::default()));
//! // Producers publish to wharf.inbox.<tenant>.<project> with `Authorization: Bearer <token>`.
//! let config = JetStreamConfig::new("nats://127.0.0.1:4222", "WHARF_INBOX", "wharf");
//! let consumer = JetStreamIngest::new(inbox, config)?;
//! consumer.run(std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! Must not know: HTTP, SQL, or any inbox rule.

pub mod answer;
mod config;
mod error;
pub mod ingest;
mod producer;
mod publish;
mod subject;

pub use answer::Settlement;
pub use config::{
    ACK_MARGIN_MS, ACK_WAIT_MS_DEFAULT, FETCH_BATCH_MAX_DEFAULT, IN_FLIGHT_MAX_DEFAULT,
    IN_FLIGHT_MAX_LIMIT, JetStreamConfig, NAK_DELAY_MS_DEFAULT, NAK_DELAY_MS_LIMIT,
    PIPELINE_MS_MAX_DEFAULT,
};
pub use error::Error;
pub use ingest::{
    AUTHORIZATION_HEADER, JetStreamIngest, JetStreamStats, Processed, REPLY_TO_HEADER,
    STATUS_HEADER,
};
pub use producer::{NatsAnswer, NatsProducer, PUBLISH_IN_FLIGHT_MAX};
pub use publish::{Published, Publisher, PublisherConfig};
pub use subject::SubjectPattern;
