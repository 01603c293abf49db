//! Publishing signed envelopes to a JetStream subject (the `envelope` kind's `nats://`
//! destinations).
//!
//! Owns: one client per server (connected on first use, reconnecting by itself, at most
//! [`SERVERS_MAX`]), the `Nats-Msg-Id` header (the event id, so the stream stores one copy of
//! every retry within its duplicate window), and what a publish result means. Must not know:
//! the outbox, fences or attempts (the adapter in `wharf-adapters` owns those), or how the
//! envelope was built.
//!
//! A stream's publish acknowledgement means the message is stored: the delivery is done.
//! Past the stream's duplicate window (2 minutes by default) a retry is stored again; a wharf
//! that consumes the stream still answers that copy `ignore-duplicate` by its event id.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream::{self, context::PublishErrorKind};
use tokio::sync::Mutex;

use crate::error::Error;

/// Most servers one publisher keeps a client for (destinations come from configuration).
pub const SERVERS_MAX: usize = 64;
/// Default of [`PublisherConfig::ack_timeout_ms`].
pub const ACK_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// Default of [`PublisherConfig::connect_timeout_ms`].
pub const CONNECT_TIMEOUT_MS_DEFAULT: u64 = 5_000;

/// How the publisher connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublisherConfig {
    /// A NATS credentials file for every server, when they ask for one.
    pub credentials_file: Option<PathBuf>,
    /// How long a connection may take, in milliseconds.
    pub connect_timeout_ms: u64,
    /// How long to wait for the stream's acknowledgement, in milliseconds.
    pub ack_timeout_ms: u64,
}

impl Default for PublisherConfig {
    fn default() -> PublisherConfig {
        PublisherConfig {
            credentials_file: None,
            connect_timeout_ms: CONNECT_TIMEOUT_MS_DEFAULT,
            ack_timeout_ms: ACK_TIMEOUT_MS_DEFAULT,
        }
    }
}

/// A stored message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The stream that stored it.
    pub stream: String,
    /// Its sequence in that stream (the first copy's, for a duplicate).
    pub sequence: u64,
    /// The stream already held a message with this `Nats-Msg-Id`.
    pub duplicate: bool,
}

/// Publishes to JetStream subjects on any number of servers.
#[derive(Debug)]
pub struct Publisher {
    config: PublisherConfig,
    clients: Mutex<HashMap<String, jetstream::Context>>,
}

impl Publisher {
    /// A publisher; nothing connects until the first publish.
    pub fn new(config: PublisherConfig) -> Publisher {
        Publisher {
            config,
            clients: Mutex::new(HashMap::new()),
        }
    }

    async fn context(&self, server: &str) -> Result<jetstream::Context, Error> {
        let mut clients = self.clients.lock().await;
        if let Some(context) = clients.get(server) {
            return Ok(context.clone());
        }
        if clients.len() >= SERVERS_MAX {
            return Err(Error::config(
                "envelope.destinations",
                format!("more than {SERVERS_MAX} NATS servers"),
            ));
        }
        let connect = crate::ingest::connect(server, self.config.credentials_file.as_deref());
        let client = tokio::time::timeout(
            Duration::from_millis(self.config.connect_timeout_ms),
            connect,
        )
        .await
        .map_err(|_| Error::Connect {
            url: server.to_owned(),
            reason: "timed out".into(),
        })??;
        let mut context = jetstream::new(client);
        context.set_timeout(Duration::from_millis(self.config.ack_timeout_ms));
        clients.insert(server.to_owned(), context.clone());
        Ok(context)
    }

    /// Publishes `body` to `subject` on `server` (`nats://host:port`) with `Nats-Msg-Id` =
    /// `message_id` and `headers`, and waits for the stream's acknowledgement.
    pub async fn publish(
        &self,
        server: &str,
        subject: &str,
        message_id: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Published, Error> {
        let context = self.context(server).await?;
        let mut message = jetstream::message::PublishMessage::build()
            .payload(body.into())
            .message_id(message_id);
        for (name, value) in headers {
            message = message.header(*name, *value);
        }
        let failed = |kind: PublishErrorKind, sent: bool, reason: String| {
            let code = match kind {
                PublishErrorKind::StreamNotFound => "no_stream",
                PublishErrorKind::TimedOut => "timeout",
                PublishErrorKind::MaxPayloadExceeded => "too_large",
                PublishErrorKind::BrokenPipe => "connection",
                _ => "refused",
            };
            // No stream answered (no responders) or the server refused the size: nothing
            // stored, whenever it was said.
            let sent = sent
                && !matches!(
                    kind,
                    PublishErrorKind::StreamNotFound | PublishErrorKind::MaxPayloadExceeded
                );
            Error::Publish {
                kind: code,
                sent,
                reason,
            }
        };
        let ack = context
            .send_publish(subject.to_owned(), message)
            .await
            .map_err(|e| failed(e.kind(), false, e.to_string()))?;
        // Sent: whatever happens now, the stream may hold it.
        let ack = ack
            .await
            .map_err(|e| failed(e.kind(), true, e.to_string()))?;
        Ok(Published {
            stream: ack.stream,
            sequence: ack.sequence,
            duplicate: ack.duplicate,
        })
    }
}
