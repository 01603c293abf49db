//! The `[[inbox.jetstream]]` entries of `wharf.toml`: one durable consumer each.
//!
//! Owns: the keys, their defaults (each with its reason) and the checks that refuse a consumer
//! that could not keep its promises, above all an ack wait shorter than the time a message may
//! spend in the pipeline: the broker would redeliver a message whose commit is still running.
//! Must not know: the inbox's rules, or where the table comes from.
//!
//! ```toml
//! [[inbox.jetstream]]
//! url = "nats://127.0.0.1:4222"
//! stream = "WHARF_INBOX"
//! consumer = "wharf"
//! subjects = "wharf.inbox.{tenant}.{project}"
//! # credentials_file = "/etc/wharf/nats.creds"
//! ```

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::error::Error;
use crate::subject::SubjectPattern;

/// Default of [`JetStreamConfig::in_flight_max`].
pub const IN_FLIGHT_MAX_DEFAULT: usize = 256;
/// Largest [`JetStreamConfig::in_flight_max`]: each message in flight holds its bytes (up to
/// `message_bytes_max`) and one slot of the inbox's group commit.
pub const IN_FLIGHT_MAX_LIMIT: usize = 4_096;
/// Default of [`JetStreamConfig::fetch_batch_max`].
pub const FETCH_BATCH_MAX_DEFAULT: usize = 128;
/// Default of [`JetStreamConfig::ack_wait_ms`].
pub const ACK_WAIT_MS_DEFAULT: u64 = 30_000;
/// Default of [`JetStreamConfig::pipeline_ms_max`].
pub const PIPELINE_MS_MAX_DEFAULT: u64 = 10_000;
/// Time kept between the end of the pipeline's budget and the broker's ack wait, in
/// milliseconds: the ack itself must travel to the broker before it redelivers.
pub const ACK_MARGIN_MS: u64 = 1_000;
/// Default of [`JetStreamConfig::nak_delay_ms`].
pub const NAK_DELAY_MS_DEFAULT: u64 = 1_000;
/// Longest [`JetStreamConfig::nak_delay_ms`]: a database back after an outage should not wait
/// longer than this for its backlog.
pub const NAK_DELAY_MS_LIMIT: u64 = 300_000;
/// Longest stream or consumer name, in bytes (JetStream's own limit is larger; names here come
/// from configuration and appear in metrics).
pub const NAME_BYTES_MAX: usize = 64;

/// One JetStream consumer feeding the inbox.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JetStreamConfig {
    /// The server, e.g. `nats://127.0.0.1:4222`.
    pub url: String,
    /// The stream. Created with `subjects`' filter when it does not exist.
    pub stream: String,
    /// The durable pull consumer's name: the broker remembers its position, so a restart goes
    /// on where it stopped. Also the peer limiter's key (`<stream>/<consumer>`).
    pub consumer: String,
    /// Where tenant and project come from: `wharf.inbox.{tenant}.{project}` by default.
    #[serde(default = "subjects_default")]
    pub subjects: String,
    /// A NATS credentials file (JWT and nkey seed), for a server that asks for one.
    #[serde(default)]
    pub credentials_file: Option<PathBuf>,
    /// Largest message, in bytes; a larger one is terminated unread. Default: the inbox's
    /// single-envelope limit. (The NATS server's own `max_payload`, 1 MiB by default, refuses
    /// larger messages at publish.)
    #[serde(default)]
    pub message_bytes_max: Option<usize>,
    /// Messages delivered and not yet settled, at most: the broker's `max_ack_pending` for the
    /// consumer and the number handled at once. Default 256: enough to fill the inbox's
    /// group commit, little memory.
    #[serde(default = "in_flight_max_default")]
    pub in_flight_max: usize,
    /// Messages asked for in one pull request; at most `in_flight_max`. Default 128.
    #[serde(default = "fetch_batch_max_default")]
    pub fetch_batch_max: usize,
    /// The broker's ack wait, in milliseconds: a message not settled by then is redelivered.
    /// Must exceed `pipeline_ms_max` by [`ACK_MARGIN_MS`]. Default 30 s.
    #[serde(default = "ack_wait_ms_default")]
    pub ack_wait_ms: u64,
    /// The longest a message may spend in the pipeline (authentication to commit), in
    /// milliseconds. Past it the message is nak'ed as outcome unknown: a commit that did land
    /// answers `ignore-duplicate` on redelivery. Default 10 s, far above a group commit.
    #[serde(default = "pipeline_ms_max_default")]
    pub pipeline_ms_max: u64,
    /// How long the broker waits before redelivering a message nak'ed for a 503-class failure,
    /// in milliseconds. Default 1 s; at most [`NAK_DELAY_MS_LIMIT`].
    #[serde(default = "nak_delay_ms_default")]
    pub nak_delay_ms: u64,
}

fn subjects_default() -> String {
    "wharf.inbox.{tenant}.{project}".to_owned()
}
fn in_flight_max_default() -> usize {
    IN_FLIGHT_MAX_DEFAULT
}
fn fetch_batch_max_default() -> usize {
    FETCH_BATCH_MAX_DEFAULT
}
fn ack_wait_ms_default() -> u64 {
    ACK_WAIT_MS_DEFAULT
}
fn pipeline_ms_max_default() -> u64 {
    PIPELINE_MS_MAX_DEFAULT
}
fn nak_delay_ms_default() -> u64 {
    NAK_DELAY_MS_DEFAULT
}

impl std::fmt::Debug for JetStreamConfig {
    // The credentials file's path is not secret; its content never enters this type.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStreamConfig")
            .field("url", &self.url)
            .field("stream", &self.stream)
            .field("consumer", &self.consumer)
            .field("subjects", &self.subjects)
            .field("credentials_file", &self.credentials_file)
            .field("in_flight_max", &self.in_flight_max)
            .field("fetch_batch_max", &self.fetch_batch_max)
            .field("ack_wait_ms", &self.ack_wait_ms)
            .field("pipeline_ms_max", &self.pipeline_ms_max)
            .finish_non_exhaustive()
    }
}

impl JetStreamConfig {
    /// A consumer of `stream` named `consumer` on `url`, with every default.
    pub fn new(
        url: impl Into<String>,
        stream: impl Into<String>,
        consumer: impl Into<String>,
    ) -> JetStreamConfig {
        JetStreamConfig {
            url: url.into(),
            stream: stream.into(),
            consumer: consumer.into(),
            subjects: subjects_default(),
            credentials_file: None,
            message_bytes_max: None,
            in_flight_max: IN_FLIGHT_MAX_DEFAULT,
            fetch_batch_max: FETCH_BATCH_MAX_DEFAULT,
            ack_wait_ms: ACK_WAIT_MS_DEFAULT,
            pipeline_ms_max: PIPELINE_MS_MAX_DEFAULT,
            nak_delay_ms: NAK_DELAY_MS_DEFAULT,
        }
    }

    /// Checks every bound; returns the parsed subject pattern.
    pub fn validate(&self) -> Result<SubjectPattern, Error> {
        if !(self.url.starts_with("nats://") || self.url.starts_with("tls://"))
            || self.url.len() <= "nats://".len()
        {
            return Err(Error::config(
                "url",
                format!(
                    "{:?}: must be nats://host:port or tls://host:port",
                    self.url
                ),
            ));
        }
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.len() <= NAME_BYTES_MAX
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        if !name_ok(&self.stream) {
            return Err(Error::config(
                "stream",
                format!("{:?}: 1..={NAME_BYTES_MAX} of A-Z a-z 0-9 _ -", self.stream),
            ));
        }
        if !name_ok(&self.consumer) {
            return Err(Error::config(
                "consumer",
                format!(
                    "{:?}: 1..={NAME_BYTES_MAX} of A-Z a-z 0-9 _ -",
                    self.consumer
                ),
            ));
        }
        if self.in_flight_max == 0 || self.in_flight_max > IN_FLIGHT_MAX_LIMIT {
            return Err(Error::config(
                "in_flight_max",
                format!("must be 1..={IN_FLIGHT_MAX_LIMIT}"),
            ));
        }
        if self.fetch_batch_max == 0 || self.fetch_batch_max > self.in_flight_max {
            return Err(Error::config(
                "fetch_batch_max",
                "must be 1..=in_flight_max",
            ));
        }
        if self.message_bytes_max == Some(0) {
            return Err(Error::config("message_bytes_max", "must be at least 1"));
        }
        if self.pipeline_ms_max == 0 {
            return Err(Error::config("pipeline_ms_max", "must be at least 1"));
        }
        if self.ack_wait_ms < self.pipeline_ms_max.saturating_add(ACK_MARGIN_MS) {
            return Err(Error::config(
                "ack_wait_ms",
                format!(
                    "{} ms is shorter than a message may spend in the pipeline \
                     (pipeline_ms_max {} ms + {ACK_MARGIN_MS} ms for the ack): the broker \
                     would redeliver messages whose commit is still running",
                    self.ack_wait_ms, self.pipeline_ms_max
                ),
            ));
        }
        if self.nak_delay_ms == 0 || self.nak_delay_ms > NAK_DELAY_MS_LIMIT {
            return Err(Error::config(
                "nak_delay_ms",
                format!("must be 1..={NAK_DELAY_MS_LIMIT}"),
            ));
        }
        SubjectPattern::parse(&self.subjects)
    }

    /// The peer limiter's key: `<stream>/<consumer>`.
    pub fn peer_name(&self) -> String {
        format!("{}/{}", self.stream, self.consumer)
    }

    pub(crate) fn ack_wait(&self) -> Duration {
        Duration::from_millis(self.ack_wait_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> JetStreamConfig {
        JetStreamConfig::new("nats://127.0.0.1:4222", "WHARF", "wharf")
    }

    #[test]
    fn defaults_are_valid() {
        ok().validate().unwrap();
    }

    #[test]
    fn every_bound_is_enforced_at_its_edge() {
        let check = |f: &dyn Fn(&mut JetStreamConfig), valid: bool| {
            let mut c = ok();
            f(&mut c);
            assert_eq!(c.validate().is_ok(), valid, "{c:?}");
        };
        // The ack wait must cover the pipeline and the ack's way back.
        check(&|c| c.ack_wait_ms = c.pipeline_ms_max + ACK_MARGIN_MS, true);
        check(
            &|c| c.ack_wait_ms = c.pipeline_ms_max + ACK_MARGIN_MS - 1,
            false,
        );
        check(&|c| c.pipeline_ms_max = 0, false);
        check(&|c| c.in_flight_max = IN_FLIGHT_MAX_LIMIT, true);
        check(&|c| c.in_flight_max = IN_FLIGHT_MAX_LIMIT + 1, false);
        check(&|c| c.in_flight_max = 0, false);
        check(&|c| c.fetch_batch_max = c.in_flight_max, true);
        check(&|c| c.fetch_batch_max = c.in_flight_max + 1, false);
        check(&|c| c.fetch_batch_max = 0, false);
        check(&|c| c.message_bytes_max = Some(0), false);
        check(&|c| c.message_bytes_max = Some(1), true);
        check(&|c| c.nak_delay_ms = NAK_DELAY_MS_LIMIT, true);
        check(&|c| c.nak_delay_ms = NAK_DELAY_MS_LIMIT + 1, false);
        check(&|c| c.nak_delay_ms = 0, false);
        check(&|c| c.stream = "a".repeat(NAME_BYTES_MAX), true);
        check(&|c| c.stream = "a".repeat(NAME_BYTES_MAX + 1), false);
        check(&|c| c.stream = "has.dot".into(), false);
        check(&|c| c.consumer = String::new(), false);
        check(&|c| c.url = "http://127.0.0.1:4222".into(), false);
        check(&|c| c.subjects = "wharf.{tenant}".into(), false);
    }

    #[test]
    fn the_table_is_closed() {
        let parsed: JetStreamConfig = serde_json::from_str(
            r#"{"url": "nats://h:4222", "stream": "S", "consumer": "c", "in_flight_max": 8, "fetch_batch_max": 4}"#,
        )
        .unwrap();
        assert_eq!(parsed.in_flight_max, 8);
        assert_eq!(parsed.ack_wait_ms, ACK_WAIT_MS_DEFAULT);
        assert!(
            serde_json::from_str::<JetStreamConfig>(
                r#"{"url": "nats://h:4222", "stream": "S", "consumer": "c", "ack_wiat_ms": 1}"#
            )
            .is_err()
        );
    }
}
