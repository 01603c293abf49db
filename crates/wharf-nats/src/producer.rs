//! A producer's side of the JetStream transport, for `wharf send --nats` and `wharf bench
//! inbox --jetstream`: publish a signed envelope to a subject with its credential, the event id
//! as `Nats-Msg-Id`, and (when asked) a reply subject for wharf's answer.
//!
//! Owns: the headers a producer sets ([`crate::ingest`] reads them) and waiting for the answer.
//! Must not know: how envelopes are built or signed (the caller passes the bytes).

use std::time::Duration;

use async_nats::jetstream;
use futures::StreamExt;

use crate::error::Error;
use crate::ingest::{AUTHORIZATION_HEADER, CORRELATION_HEADER, REPLY_TO_HEADER, STATUS_HEADER};
use crate::publish::Published;

/// Most publishes [`NatsProducer::publish_many`] keeps waiting for their acknowledgement at
/// once: enough to keep a loopback server busy, a bounded amount of memory.
pub const PUBLISH_IN_FLIGHT_MAX: usize = 1_024;

/// What wharf answered on the reply subject.
#[derive(Debug, Clone, PartialEq)]
pub struct NatsAnswer {
    /// The HTTP status of the same answer (`Wharf-Status`).
    pub status: u16,
    /// The correlation id (`Wharf-Correlation-Id`).
    pub correlation_id: String,
    /// The answer's JSON, as HTTP's body.
    pub body: serde_json::Value,
}

/// A connection for publishing envelopes.
#[derive(Debug, Clone)]
pub struct NatsProducer {
    client: async_nats::Client,
    js: jetstream::Context,
}

fn publish_error(e: &jetstream::context::PublishError, sent: bool) -> Error {
    Error::Publish {
        kind: "refused",
        sent,
        reason: e.to_string(),
    }
}

impl NatsProducer {
    /// Connects to `url`, with a credentials file when given.
    pub async fn connect(
        url: &str,
        credentials_file: Option<&std::path::Path>,
    ) -> Result<NatsProducer, Error> {
        let client = crate::ingest::connect(url, credentials_file).await?;
        Ok(NatsProducer {
            js: jetstream::new(client.clone()),
            client,
        })
    }

    fn headers(token: &str, event_id: &str) -> async_nats::HeaderMap {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(AUTHORIZATION_HEADER, format!("Bearer {token}").as_str());
        headers.insert("Nats-Msg-Id", event_id);
        headers
    }

    /// Publishes one envelope and waits for the stream to store it; then, with
    /// `answer_timeout`, waits that long for wharf's answer on a fresh reply subject
    /// (`None` when none came: the envelope is stored, and wharf will decide it when it
    /// consumes the stream).
    pub async fn send(
        &self,
        subject: &str,
        token: &str,
        event_id: &str,
        body: Vec<u8>,
        answer_timeout: Option<Duration>,
    ) -> Result<(Published, Option<NatsAnswer>), Error> {
        let mut headers = NatsProducer::headers(token, event_id);
        let mut replies = None;
        if answer_timeout.is_some() {
            let reply_to = self.client.new_inbox();
            let subscription = self
                .client
                .subscribe(reply_to.clone())
                .await
                .map_err(|e| Error::jetstream("subscribe", e))?;
            headers.insert(REPLY_TO_HEADER, reply_to.as_str());
            replies = Some(subscription);
        }
        let ack = self
            .js
            .publish_with_headers(subject.to_owned(), headers, body.into())
            .await
            .map_err(|e| publish_error(&e, false))?
            .await
            .map_err(|e| publish_error(&e, true))?;
        let published = Published {
            stream: ack.stream,
            sequence: ack.sequence,
            duplicate: ack.duplicate,
        };
        let (Some(mut replies), Some(wait)) = (replies, answer_timeout) else {
            return Ok((published, None));
        };
        let answer = match tokio::time::timeout(wait, replies.next()).await {
            Ok(Some(reply)) => {
                let header = |name: &str| {
                    reply
                        .headers
                        .as_ref()
                        .and_then(|h| h.get(name))
                        .map(|v| v.as_str().to_owned())
                };
                Some(NatsAnswer {
                    status: header(STATUS_HEADER)
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0),
                    correlation_id: header(CORRELATION_HEADER).unwrap_or_default(),
                    body: serde_json::from_slice(&reply.payload).unwrap_or(serde_json::Value::Null),
                })
            }
            _ => None,
        };
        Ok((published, answer))
    }

    /// Publishes many `(subject, token, event id, body)` messages, up to
    /// [`PUBLISH_IN_FLIGHT_MAX`] waiting for their acknowledgement at once, and returns once
    /// the stream stored every one. No answers are asked for.
    pub async fn publish_many(
        &self,
        messages: Vec<(String, String, String, Vec<u8>)>,
    ) -> Result<u64, Error> {
        let mut stored = 0;
        let mut pending = futures::stream::FuturesUnordered::new();
        for (subject, token, event_id, body) in messages {
            if pending.len() >= PUBLISH_IN_FLIGHT_MAX
                && let Some(ack) = pending.next().await
            {
                let _: jetstream::publish::PublishAck = ack?;
                stored += 1;
            }
            let ack = self
                .js
                .publish_with_headers(
                    subject,
                    NatsProducer::headers(&token, &event_id),
                    body.into(),
                )
                .await
                .map_err(|e| publish_error(&e, false))?;
            pending.push(async move { ack.await.map_err(|e| publish_error(&e, true)) });
        }
        while let Some(ack) = pending.next().await {
            ack?;
            stored += 1;
        }
        Ok(stored)
    }

    /// Deletes a stream (the bench's own, after a run). A missing stream is not an error.
    pub async fn delete_stream(&self, stream: &str) -> Result<(), Error> {
        match self.js.delete_stream(stream).await {
            Ok(_) => Ok(()),
            Err(e) if e.to_string().contains("not found") => Ok(()),
            Err(e) => Err(Error::jetstream("stream delete", e)),
        }
    }

    /// Creates a stream over `subjects` (replacing nothing: it must not exist).
    pub async fn create_stream(&self, stream: &str, subjects: &str) -> Result<(), Error> {
        self.js
            .create_stream(jetstream::stream::Config {
                name: stream.to_owned(),
                subjects: vec![subjects.to_owned()],
                ..Default::default()
            })
            .await
            .map(|_| ())
            .map_err(|e| Error::jetstream("stream create", e))
    }
}
