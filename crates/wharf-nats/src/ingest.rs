//! The inbox's JetStream consumer: messages in, the inbox pipeline, ack/term/nak out.
//!
//! Owns: connecting (with backoff until stopped), the stream and durable pull consumer it reads
//! (created when missing, updated to this configuration when present), the order of the steps
//! the broker adds around the pipeline, and the in-flight bound. Must not know any inbox rule:
//! every envelope goes through [`Inbox::ingest_from`], the path HTTP's
//! [`Inbox::ingest_correlated`] takes, so the order of checks is the inbox's (SPEC §3.4).
//!
//! One message, in this order:
//!
//! 0. its size against `message_bytes_max`, before anything reads it: a larger one is
//!    terminated and counted (`wharf_jetstream_messages_total{settlement="term",
//!    reason="body-too-large"}`), never decoded, never audited;
//! 1. the inbox's peer limiter, keyed on this consumer (`<stream>/<consumer>`,
//!    [`Peer::Consumer`]): the broker is the peer;
//! 2. the bearer credential from the message's `Authorization: Bearer …` header;
//! 3. tenant and project from the subject ([`SubjectPattern`]), checked by the inbox against
//!    the credential's tenant and the envelope's own route;
//! 4. the rest of the pipeline, to its commit;
//! 5. the answer's JSON to the producer's `Wharf-Reply-To` subject, when it gave one (a
//!    JetStream message's own reply subject is the broker's ack subject, so the producer's
//!    travels in a header), with `Wharf-Status` (the HTTP status of the same answer);
//! 6. the settlement ([`Settlement`]): ack only after the commit; term for a refusal no
//!    redelivery can change (audited by the inbox as HTTP's is); nak with `nak_delay_ms` for a
//!    503 or a pipeline that overran `pipeline_ms_max` (outcome unknown), and with the
//!    limiter's wait for a 429. A lost ack redelivers the message, and the inbox answers
//!    `ignore-duplicate`: no second identity.
//!
//! Order: messages of one producer stream are decided in the order the broker delivered them,
//! and different streams side by side. The stream is known only after authentication, so the
//! lane key is what names it before: the subject (tenant, project) and the credential header
//! (the producer). In-order envelopes are therefore decided in order (`in-order`, not `gap`
//! then a fill). The messages of a lane that arrived while its previous ones were being
//! committed go through together, as one batch of the inbox's batch path
//! ([`Inbox::ingest_batch_from`], one transaction, one answer per envelope), at most
//! [`LANE_BATCH_MAX`] at a time: a lane costs one commit per batch, not per message. A batch
//! the inbox could not decide as a whole (a message that is not a JSON object, a limit) is
//! taken one message at a time instead, so a poison message never takes its neighbours along.
//!
//! Bounds: the broker delivers at most `in_flight_max` unsettled messages (the consumer's
//! `max_ack_pending`), which are also the most handled at once; a pull asks for at most
//! `fetch_batch_max`; `max_deliver` is unlimited, because a database down for an hour must not
//! make the broker drop envelopes — a message that can never succeed is terminated instead. A
//! message waiting behind its lane's earlier batches ages toward the ack wait as well; should
//! the broker redeliver it meanwhile, the second copy is answered `ignore-duplicate` (work
//! done twice, nothing stored twice).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer, stream};
use futures::{FutureExt, StreamExt};
use wharf::inbox::{Inbox, Peer, Response, Status, new_correlation_id};

use crate::answer::{self, Settlement};
use crate::config::JetStreamConfig;
use crate::error::Error;
use crate::subject::SubjectPattern;

/// The header holding the producer's credential, as over HTTP: `Bearer <token>`.
pub const AUTHORIZATION_HEADER: &str = "Authorization";
/// The header naming the subject the producer wants the answer on.
pub const REPLY_TO_HEADER: &str = "Wharf-Reply-To";
/// The reply's header with the HTTP status of the same answer.
pub const STATUS_HEADER: &str = "Wharf-Status";
/// The reply's header with the answer's correlation id.
pub const CORRELATION_HEADER: &str = "Wharf-Correlation-Id";

/// First pause after a failed connection or set-up, in milliseconds; doubles up to
/// [`RECONNECT_MS_MAX`].
pub const RECONNECT_MS_MIN: u64 = 100;
/// Longest pause between connection attempts, in milliseconds.
pub const RECONNECT_MS_MAX: u64 = 5_000;
/// How long one pull request waits for messages, in milliseconds (the server's idle
/// heartbeat is a tenth of it, so a dead connection is noticed within seconds).
pub const PULL_EXPIRES_MS: u64 = 10_000;

/// How a consumer's messages were settled, counted since it was built. A test hook and a cheap
/// health signal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JetStreamStats {
    /// Acknowledged after their commit.
    pub acked: u64,
    /// Terminated (refusals, bad credentials, too large).
    pub terminated: u64,
    /// Of those, terminated for their size, unread.
    pub oversize: u64,
    /// Nak'ed for redelivery (503, limited, pipeline overran).
    pub naked: u64,
    /// Answers published to a producer's reply subject.
    pub replied: u64,
}

/// Most messages of one lane committed as one batch: the batch size `wharf bench inbox`
/// measures the batch endpoint with, small enough that one stream lock is held briefly and
/// that the lane's later messages do not wait long behind it.
pub const LANE_BATCH_MAX: usize = 100;

/// The messages of each producer stream waiting for their turn (at most `in_flight_max` in all:
/// the broker delivers no more), and whether a task is working through them. An entry leaves
/// with its lane's last message.
#[derive(Debug, Default)]
struct Lanes {
    lanes: std::sync::Mutex<HashMap<String, Lane>>,
}

#[derive(Debug, Default)]
struct Lane {
    waiting: VecDeque<jetstream::Message>,
    running: bool,
}

impl Lanes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lane>> {
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `message`; `true` when the caller is to work through the lane.
    fn push(&self, key: &str, message: jetstream::Message) -> bool {
        let mut lanes = self.lock();
        let lane = lanes.entry(key.to_owned()).or_default();
        lane.waiting.push_back(message);
        !std::mem::replace(&mut lane.running, true)
    }

    /// The lane's next messages (up to `n`), or `None` when it is empty and gone.
    fn next(&self, key: &str, n: usize) -> Option<Vec<jetstream::Message>> {
        let mut lanes = self.lock();
        let lane = lanes.get_mut(key)?;
        if lane.waiting.is_empty() {
            lanes.remove(key);
            return None;
        }
        let take = n.min(lane.waiting.len());
        Some(lane.waiting.drain(..take).collect())
    }
}

#[derive(Debug, Default)]
struct Counters {
    acked: AtomicU64,
    terminated: AtomicU64,
    oversize: AtomicU64,
    naked: AtomicU64,
    replied: AtomicU64,
}

/// What the pipeline made of one message, before the broker is told.
#[derive(Debug, Clone)]
pub struct Processed {
    /// What to tell the broker.
    pub settlement: Settlement,
    /// The inbox's answer (or the consumer's own, for a message too large or a pipeline that
    /// overran).
    pub answer: Response,
}

/// One `[[inbox.jetstream]]` consumer feeding an [`Inbox`].
#[derive(Debug)]
pub struct JetStreamIngest {
    inbox: Arc<Inbox>,
    config: JetStreamConfig,
    pattern: SubjectPattern,
    peer: Peer,
    message_bytes_max: usize,
    counters: Counters,
    lanes: Lanes,
}

impl JetStreamIngest {
    /// A consumer for `inbox`, after checking `config` ([`JetStreamConfig::validate`]).
    pub fn new(inbox: Arc<Inbox>, config: JetStreamConfig) -> Result<JetStreamIngest, Error> {
        let pattern = config.validate()?;
        let message_bytes_max = config
            .message_bytes_max
            .unwrap_or(inbox.config().body_bytes_max);
        Ok(JetStreamIngest {
            peer: Peer::Consumer(config.peer_name().into()),
            inbox,
            pattern,
            message_bytes_max,
            config,
            counters: Counters::default(),
            lanes: Lanes::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &JetStreamConfig {
        &self.config
    }

    /// The subject pattern.
    pub fn pattern(&self) -> &SubjectPattern {
        &self.pattern
    }

    /// Settlements so far.
    pub fn stats(&self) -> JetStreamStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        JetStreamStats {
            acked: get(&c.acked),
            terminated: get(&c.terminated),
            oversize: get(&c.oversize),
            naked: get(&c.naked),
            replied: get(&c.replied),
        }
    }

    /// Steps 0–4 for one message: its answer and settlement, without telling the broker. For
    /// callers that drive their own consumer; [`JetStreamIngest::run`] uses it.
    pub async fn process(&self, message: &async_nats::Message) -> Processed {
        let correlation_id = new_correlation_id();
        let bare = |status, reason| Response {
            status,
            reason,
            correlation_id: correlation_id.clone(),
            acknowledged_sequence: None,
            retry_after_s: None,
            original: None,
        };
        let nak_delay = Duration::from_millis(self.config.nak_delay_ms);
        // Step 0: the length only, before a byte of it is looked at.
        if message.payload.len() > self.message_bytes_max {
            self.counters.oversize.fetch_add(1, Ordering::Relaxed);
            return Processed {
                settlement: Settlement::Term,
                answer: bare(Status::TooLarge, "body-too-large"),
            };
        }
        let bearer = message
            .headers
            .as_ref()
            .and_then(|h| h.get(AUTHORIZATION_HEADER))
            .and_then(|v| bearer_token(v.as_str()))
            .unwrap_or_default();
        let route = self.pattern.route(message.subject.as_str());
        let pipeline = self.inbox.ingest_from(
            correlation_id.clone(),
            self.peer.clone(),
            bearer,
            route,
            &message.payload,
        );
        match tokio::time::timeout(Duration::from_millis(self.config.pipeline_ms_max), pipeline)
            .await
        {
            Ok(answer) => Processed {
                settlement: answer::settlement(&answer, nak_delay),
                answer,
            },
            Err(_) => {
                // The commit may still land; the redelivery will say so (ignore-duplicate).
                tracing::warn!(%correlation_id, consumer = %self.config.peer_name(),
                    "the pipeline overran pipeline_ms_max; nak'ed, outcome unknown");
                Processed {
                    settlement: Settlement::Nak(nak_delay),
                    answer: bare(Status::Unavailable, "pipeline-timeout"),
                }
            }
        }
    }

    /// Consumes until `stop` resolves: connects (retrying with backoff), sets up the stream and
    /// the durable consumer, and handles up to `in_flight_max` messages at once. On stop it
    /// asks for no more and lets the messages in hand finish (each is settled, or, if the
    /// process dies first, redelivered after the ack wait).
    pub async fn run(&self, stop: impl Future<Output = ()> + Send) -> Result<(), Error> {
        let stop = stop.boxed().shared();
        let mut pause = Duration::from_millis(RECONNECT_MS_MIN);
        loop {
            let attempt = async {
                let (client, consumer) = self.connect().await?;
                pause = Duration::from_millis(RECONNECT_MS_MIN);
                self.consume(&client, &consumer, stop.clone()).await
            };
            let failed = tokio::select! {
                result = attempt => match result {
                    Ok(()) => return Ok(()),
                    Err(e) => e,
                },
                () = stop.clone() => return Ok(()),
            };
            if let Error::Config { .. } | Error::Credentials { .. } = failed {
                return Err(failed);
            }
            tracing::warn!(consumer = %self.config.peer_name(), error = %failed,
                pause_ms = pause.as_millis() as u64, "JetStream consumer not running; retrying");
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.clone() => return Ok(()),
            }
            pause = (pause * 2).min(Duration::from_millis(RECONNECT_MS_MAX));
        }
    }

    /// Connects and sets up the stream (created with the pattern's filter when missing) and the
    /// durable consumer (created, or updated to this configuration).
    pub async fn connect(&self) -> Result<(async_nats::Client, consumer::PullConsumer), Error> {
        let client = connect(&self.config.url, self.config.credentials_file.as_deref()).await?;
        let context = jetstream::new(client.clone());
        let filter = self.pattern.filter();
        let stream = context
            .get_or_create_stream(stream::Config {
                name: self.config.stream.clone(),
                subjects: vec![filter.clone()],
                ..Default::default()
            })
            .await
            .map_err(|e| Error::jetstream("stream set-up", e))?;
        let in_flight = i64::try_from(self.config.in_flight_max).unwrap_or(i64::MAX);
        let consumer = stream
            .create_consumer(consumer::pull::Config {
                durable_name: Some(self.config.consumer.clone()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: self.config.ack_wait(),
                max_deliver: -1,
                filter_subject: filter,
                max_ack_pending: in_flight,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::jetstream("consumer set-up", e))?;
        Ok((client, consumer))
    }

    async fn consume(
        &self,
        client: &async_nats::Client,
        consumer: &consumer::PullConsumer,
        stop: impl Future<Output = ()> + Send,
    ) -> Result<(), Error> {
        let messages = consumer
            .stream()
            .max_messages_per_batch(self.config.fetch_batch_max)
            .expires(Duration::from_millis(PULL_EXPIRES_MS))
            .heartbeat(Duration::from_millis(PULL_EXPIRES_MS / 10))
            .messages()
            .await
            .map_err(|e| Error::jetstream("pull", e))?;
        let ended = std::sync::atomic::AtomicBool::new(false);
        messages
            .take_until(stop)
            .for_each_concurrent(self.config.in_flight_max, |item| async {
                match item {
                    Ok(message) => self.handle(client, message).await,
                    Err(e) => {
                        // A missed heartbeat or a pull error: the client pulls again by itself
                        // (and reconnects); a deleted consumer needs a new set-up.
                        if matches!(e.kind(), consumer::pull::MessagesErrorKind::ConsumerDeleted) {
                            ended.store(true, Ordering::Relaxed);
                        }
                        tracing::warn!(consumer = %self.config.peer_name(), error = %e,
                            "JetStream pull failed");
                    }
                }
            })
            .await;
        if ended.load(Ordering::Relaxed) {
            return Err(Error::jetstream("consume", "the consumer was deleted"));
        }
        Ok(())
    }

    /// Queues one message on its producer's lane; the first task to find the lane idle works
    /// through it, batch after batch, in delivery order.
    async fn handle(&self, client: &async_nats::Client, message: jetstream::Message) {
        let key = format!(
            "{}\n{}",
            message.subject,
            message
                .headers
                .as_ref()
                .and_then(|h| h.get(AUTHORIZATION_HEADER))
                .map_or("", |v| v.as_str())
        );
        if !self.lanes.push(&key, message) {
            return;
        }
        let batch_max = self.batch_max();
        while let Some(messages) = self.lanes.next(&key, batch_max) {
            self.settle_batch(client, messages).await;
        }
    }

    /// The most messages one batch may hold: [`LANE_BATCH_MAX`], and never more than the
    /// inbox takes in a batch or its identity limiter's burst can cover (past which it would
    /// refuse the whole batch).
    fn batch_max(&self) -> usize {
        let inbox = self.inbox.config();
        let burst = if inbox.identity_limit.is_unlimited() {
            usize::MAX
        } else {
            usize::try_from(inbox.identity_limit.burst).unwrap_or(usize::MAX)
        };
        LANE_BATCH_MAX
            .min(inbox.batch_envelopes_max)
            .min(burst)
            .max(1)
    }

    /// Decides `messages` (one lane's, in order) together, then replies to and settles each.
    async fn settle_batch(&self, client: &async_nats::Client, messages: Vec<jetstream::Message>) {
        let together = messages.len() > 1
            && messages.iter().all(|m| {
                m.payload.len() <= self.message_bytes_max
                    && m.payload.first() == Some(&b'{')
                    && serde_json::from_slice::<&serde_json::value::RawValue>(&m.payload).is_ok()
            })
            && messages.iter().map(|m| m.payload.len() + 1).sum::<usize>() + 16
                <= self.inbox.config().batch_body_bytes_max;
        if together && let Some(answers) = self.process_batch(&messages).await {
            for (message, processed) in messages.into_iter().zip(answers) {
                self.finish(client, message, processed).await;
            }
            return;
        }
        for message in messages {
            let processed = self.process(&message.message).await;
            self.finish(client, message, processed).await;
        }
    }

    /// One batch through the inbox: an answer per message, or `None` when the inbox answered
    /// the batch as a whole in a way that would not be each message's own answer (then each is
    /// taken alone). A whole-batch 401, 429 or 503 is each message's answer.
    async fn process_batch(&self, messages: &[jetstream::Message]) -> Option<Vec<Processed>> {
        let first = messages.first()?;
        let correlation_id = new_correlation_id();
        let bearer = first
            .headers
            .as_ref()
            .and_then(|h| h.get(AUTHORIZATION_HEADER))
            .and_then(|v| bearer_token(v.as_str()))
            .unwrap_or_default();
        let route = self.pattern.route(first.subject.as_str());
        let mut body = b"{\"envelopes\":[".to_vec();
        for (i, m) in messages.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(&m.payload);
        }
        body.extend_from_slice(b"]}");
        let nak_delay = Duration::from_millis(self.config.nak_delay_ms);
        let pipeline = self.inbox.ingest_batch_from(
            correlation_id.clone(),
            self.peer.clone(),
            bearer,
            route,
            &body,
        );
        let whole = |answer: Response| {
            let settlement = answer::settlement(&answer, nak_delay);
            messages
                .iter()
                .map(|_| Processed {
                    settlement,
                    answer: answer.clone(),
                })
                .collect()
        };
        let Ok(batch) =
            tokio::time::timeout(Duration::from_millis(self.config.pipeline_ms_max), pipeline)
                .await
        else {
            tracing::warn!(%correlation_id, consumer = %self.config.peer_name(),
                "the pipeline overran pipeline_ms_max; nak'ed, outcome unknown");
            return Some(whole(Response {
                status: Status::Unavailable,
                reason: "pipeline-timeout",
                correlation_id,
                acknowledged_sequence: None,
                retry_after_s: None,
                original: None,
            }));
        };
        match batch.head.status {
            Status::Decided if batch.items.len() == messages.len() => Some(
                batch
                    .items
                    .into_iter()
                    .map(|item| {
                        let answer = Response {
                            status: Status::Outcome(item.outcome),
                            reason: item.reason,
                            correlation_id: batch.head.correlation_id.clone(),
                            acknowledged_sequence: batch.head.acknowledged_sequence,
                            retry_after_s: None,
                            original: item.original,
                        };
                        Processed {
                            settlement: answer::settlement(&answer, nak_delay),
                            answer,
                        }
                    })
                    .collect(),
            ),
            Status::Unauthenticated | Status::RateLimited | Status::Unavailable => {
                Some(whole(batch.head))
            }
            // Refused as a whole (not a list the inbox could read) or too large for it: each
            // message gets its own answer instead.
            _ => None,
        }
    }

    async fn finish(
        &self,
        client: &async_nats::Client,
        message: jetstream::Message,
        processed: Processed,
    ) {
        let reply_to = message
            .headers
            .as_ref()
            .and_then(|h| h.get(REPLY_TO_HEADER))
            .map(|v| v.as_str().to_owned());
        if let Some(reply_to) = reply_to.filter(|s| is_reply_subject(s)) {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(
                STATUS_HEADER,
                answer::http_status(&processed.answer).to_string().as_str(),
            );
            headers.insert(CORRELATION_HEADER, processed.answer.correlation_id.as_str());
            let body = answer::json(&processed.answer);
            // Best effort, before the settlement: an answer lost here is sent again with the
            // redelivery (as ignore-duplicate) if the ack is lost too; otherwise the producer
            // asks again over HTTP or republishes, and learns the same.
            match client
                .publish_with_headers(reply_to, headers, body.into())
                .await
            {
                Ok(()) => {
                    self.counters.replied.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => tracing::debug!(error = %e, "reply not sent"),
            }
        }
        let kind = match processed.settlement {
            Settlement::Ack => AckKind::Ack,
            Settlement::Term => AckKind::Term,
            Settlement::Nak(delay) => AckKind::Nak(Some(delay)),
        };
        let counter = match processed.settlement {
            Settlement::Ack => &self.counters.acked,
            Settlement::Term => &self.counters.terminated,
            Settlement::Nak(_) => &self.counters.naked,
        };
        metrics::counter!(
            "wharf_jetstream_messages_total",
            "consumer" => self.config.peer_name(),
            "settlement" => processed.settlement.as_str(),
            "reason" => processed.answer.reason
        )
        .increment(1);
        match message.ack_with(kind).await {
            Ok(()) => {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            // The broker redelivers after the ack wait; the inbox answers the redelivery.
            Err(e) => tracing::warn!(error = %e, settlement = processed.settlement.as_str(),
                "JetStream settlement not sent; the message will be redelivered"),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` value.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Longest reply subject accepted, in bytes.
pub const REPLY_SUBJECT_BYTES_MAX: usize = 256;

/// A subject wharf will publish an answer to: bounded, no wildcards, no whitespace, and not a
/// JetStream API subject (a producer must not make wharf call the broker's API).
fn is_reply_subject(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= REPLY_SUBJECT_BYTES_MAX
        && !s.starts_with("$JS.")
        && !s.contains(['*', '>'])
        && !s.chars().any(char::is_whitespace)
        && s.split('.').all(|t| !t.is_empty())
}

/// A client for `url`, with the credentials file when given.
pub(crate) async fn connect(
    url: &str,
    credentials_file: Option<&std::path::Path>,
) -> Result<async_nats::Client, Error> {
    let mut options = async_nats::ConnectOptions::new()
        .name("wharf")
        .connection_timeout(Duration::from_secs(5));
    if let Some(path) = credentials_file {
        options = options
            .credentials_file(path)
            .await
            .map_err(|source| Error::Credentials {
                path: path.display().to_string(),
                source,
            })?;
    }
    options.connect(url).await.map_err(|e| Error::Connect {
        url: url.to_owned(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("abc"), None);
    }

    #[test]
    fn reply_subjects() {
        assert!(is_reply_subject("_INBOX.abc"));
        assert!(is_reply_subject(&"a".repeat(REPLY_SUBJECT_BYTES_MAX)));
        assert!(!is_reply_subject(&"a".repeat(REPLY_SUBJECT_BYTES_MAX + 1)));
        assert!(!is_reply_subject("$JS.API.STREAM.DELETE.X"));
        assert!(!is_reply_subject("a.*"));
        assert!(!is_reply_subject("a.>"));
        assert!(!is_reply_subject("a b"));
        assert!(!is_reply_subject("a..b"));
        assert!(!is_reply_subject(""));
    }
}
