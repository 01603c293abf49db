//! The recording providers: an HTTP webhook receiver and an SMTP relay on loopback that log
//! every call they receive (idempotency key, lane, start and end, what they answered) and
//! answer some calls with a provider fault (5xx, 4xx, a stall past the client's timeout).
//!
//! Owns: the [`Effect`] log and the provider-fault dice. Must not know: the database, wharf's
//! processes, or what the checker concludes from the log.
//!
//! Keys carry their lane: every action's idempotency key is `<lane>.<sequence>` (see
//! [`key_for`]), the webhook sends it as `webhook-id`, and the email goes to `<key>@chaos.test`,
//! so both sinks know key and lane from the first line of the call, before any fault.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng as _;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// The run's clock: microseconds since the run started, one clock for every sink so their
/// intervals compare.
#[derive(Debug, Clone, Copy)]
pub struct Clock(Instant);

impl Clock {
    /// A clock starting now.
    pub fn start() -> Clock {
        Clock(Instant::now())
    }

    /// Microseconds since the start.
    pub fn now_us(&self) -> i64 {
        i64::try_from(self.0.elapsed().as_micros()).unwrap_or(i64::MAX)
    }
}

/// Which provider received a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// The webhook receiver.
    Http,
    /// The SMTP relay.
    Smtp,
}

/// What a sink answered a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// Accepted (2xx; `250` after the message body): the effect happened.
    Delivered,
    /// A permanent refusal (HTTP 4xx; SMTP 550 at `RCPT`): nothing happened.
    Refused,
    /// A temporary refusal (HTTP 5xx; SMTP 451 at `RCPT`): nothing happened, retry later.
    TempFailed,
    /// The sink took the call (the webhook's body, the message's final dot), counted it as an
    /// effect that happened, and then said nothing for longer than the client waits: the
    /// client cannot know. The effect's interval ends when it was taken.
    TimedOut,
}

impl Answer {
    /// Whether the effect reached the outside world (or may have, as far as the sender knows).
    pub fn landed(self) -> bool {
        matches!(self, Answer::Delivered | Answer::TimedOut)
    }
}

/// One call a sink received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effect {
    /// The provider.
    pub channel: Channel,
    /// The action's idempotency key (`webhook-id`, or the recipient's local part).
    pub key: String,
    /// The lane, from the key.
    pub lane: String,
    /// The `Message-ID` of an email that got as far as its body.
    pub message_id: Option<String>,
    /// When the call began (request received; `MAIL FROM`), run microseconds.
    pub started_us: i64,
    /// When the sink answered (or, for [`Answer::TimedOut`], took the effect).
    pub ended_us: i64,
    /// What it answered.
    pub answer: Answer,
}

/// The idempotency key of action `sequence` of `lane`.
pub fn key_for(lane: &str, sequence: u64) -> String {
    format!("{lane}.{sequence:07}")
}

/// The lane a key belongs to (everything before its last dot).
pub fn lane_of(key: &str) -> &str {
    key.rsplit_once('.').map_or(key, |(lane, _)| lane)
}

/// How often a sink answers with a fault, in calls per thousand. Adjustable while running (the
/// harness turns faults off for the final drain).
#[derive(Debug, Default)]
pub struct FaultDice {
    /// Permanent refusals (HTTP 4xx, SMTP 550).
    pub refuse_permille: AtomicU64,
    /// Temporary refusals (HTTP 5xx, SMTP 451).
    pub tempfail_permille: AtomicU64,
    /// Stalls past the client's timeout after taking the effect.
    pub timeout_permille: AtomicU64,
    /// Off: every call is delivered.
    pub enabled: AtomicBool,
}

impl FaultDice {
    /// Dice with these rates, enabled.
    pub fn new(refuse: u64, tempfail: u64, timeout: u64) -> FaultDice {
        FaultDice {
            refuse_permille: AtomicU64::new(refuse),
            tempfail_permille: AtomicU64::new(tempfail),
            timeout_permille: AtomicU64::new(timeout),
            enabled: AtomicBool::new(true),
        }
    }

    fn roll(&self) -> Answer {
        if !self.enabled.load(Ordering::Relaxed) {
            return Answer::Delivered;
        }
        let refuse = self.refuse_permille.load(Ordering::Relaxed);
        let tempfail = self.tempfail_permille.load(Ordering::Relaxed);
        let timeout = self.timeout_permille.load(Ordering::Relaxed);
        let roll = rand::thread_rng().gen_range(0..1000);
        if roll < refuse {
            Answer::Refused
        } else if roll < refuse + tempfail {
            Answer::TempFailed
        } else if roll < refuse + tempfail + timeout {
            Answer::TimedOut
        } else {
            Answer::Delivered
        }
    }
}

/// The shared log of both sinks.
#[derive(Debug)]
pub struct Recorder {
    clock: Clock,
    effects: Mutex<Vec<Effect>>,
    /// Effects that landed (delivered or timed out), for the harness's backlog estimate.
    pub finished: AtomicU64,
}

impl Recorder {
    /// An empty log on `clock`.
    pub fn new(clock: Clock) -> Arc<Recorder> {
        Arc::new(Recorder {
            clock,
            effects: Mutex::new(Vec::new()),
            finished: AtomicU64::new(0),
        })
    }

    /// The run's clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    fn push(&self, effect: Effect) {
        if effect.answer != Answer::TempFailed {
            self.finished.fetch_add(1, Ordering::Relaxed);
        }
        self.effects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(effect);
    }

    /// Everything logged so far.
    pub fn effects(&self) -> Vec<Effect> {
        self.effects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// How long a stalled sink keeps the caller waiting: longer than any client timeout the
/// harness configures.
pub const STALL: Duration = Duration::from_millis(3_500);

/// A running HTTP sink.
pub struct HttpSink {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// Its fault dice.
    pub dice: Arc<FaultDice>,
}

/// Starts the webhook receiver on a free loopback port. Every `POST` is a call; the key is the
/// `webhook-id` header.
pub async fn http_sink(recorder: Arc<Recorder>, dice: Arc<FaultDice>) -> anyhow::Result<HttpSink> {
    use axum::http::{HeaderMap, StatusCode};
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let state = (recorder, dice.clone());
    let handler = move |headers: HeaderMap, _body: axum::body::Bytes| {
        let (recorder, dice) = state.clone();
        async move {
            let started_us = recorder.clock().now_us();
            let key = headers
                .get("webhook-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            let answer = dice.roll();
            if answer == Answer::Delivered {
                // A receiver takes a moment: long enough that two calls of one lane at once
                // would overlap in the log.
                let pause = rand::thread_rng().gen_range(0..3);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            recorder.push(Effect {
                channel: Channel::Http,
                lane: lane_of(&key).to_owned(),
                key,
                message_id: None,
                started_us,
                ended_us: recorder.clock().now_us(),
                answer,
            });
            match answer {
                Answer::Delivered => StatusCode::OK,
                Answer::Refused => StatusCode::UNPROCESSABLE_ENTITY,
                Answer::TempFailed => StatusCode::SERVICE_UNAVAILABLE,
                Answer::TimedOut => {
                    tokio::time::sleep(STALL).await;
                    StatusCode::OK
                }
            }
        }
    };
    let app = axum::Router::new().fallback(axum::routing::post(handler));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(HttpSink { base, dice })
}

/// A running SMTP sink.
pub struct SmtpSink {
    /// Its loopback port.
    pub port: u16,
    /// Its fault dice.
    pub dice: Arc<FaultDice>,
}

/// Starts the SMTP relay on a free loopback port: plain text, no authentication, one message
/// per `MAIL FROM`. Faults: 550 or 451 at `RCPT` (before the body: nothing happened), or a
/// stall after the final dot (the message was taken; the client cannot know).
pub async fn smtp_sink(recorder: Arc<Recorder>, dice: Arc<FaultDice>) -> anyhow::Result<SmtpSink> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let d = dice.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (recorder, dice) = (recorder.clone(), d.clone());
            tokio::spawn(async move {
                let _ = smtp_session(stream, &recorder, &dice).await;
            });
        }
    });
    Ok(SmtpSink { port, dice })
}

/// Bytes of one SMTP line or message the sink reads at most: the harness's messages are tiny.
const SMTP_BYTES_MAX: usize = 64 * 1024;

async fn smtp_session(
    stream: tokio::net::TcpStream,
    recorder: &Recorder,
    dice: &FaultDice,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    write.write_all(b"220 chaos ESMTP\r\n").await?;
    let mut started_us = 0;
    let mut key = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 || line.len() > SMTP_BYTES_MAX {
            return Ok(());
        }
        let upper = line.to_ascii_uppercase();
        if upper.starts_with("EHLO") || upper.starts_with("HELO") {
            write.write_all(b"250-chaos\r\n250 8BITMIME\r\n").await?;
        } else if upper.starts_with("MAIL FROM") {
            started_us = recorder.clock().now_us();
            key.clear();
            write.write_all(b"250 OK\r\n").await?;
        } else if upper.starts_with("RCPT TO") {
            let address = line
                .split_once('<')
                .and_then(|(_, rest)| rest.split_once('>'))
                .map_or("", |(address, _)| address);
            key = address.split('@').next().unwrap_or("").to_owned();
            let answer = match dice.roll() {
                Answer::TimedOut => Answer::Delivered, // stalls come after the body
                other => other,
            };
            if answer == Answer::Delivered {
                write.write_all(b"250 OK\r\n").await?;
                continue;
            }
            recorder.push(Effect {
                channel: Channel::Smtp,
                lane: lane_of(&key).to_owned(),
                key: key.clone(),
                message_id: None,
                started_us,
                ended_us: recorder.clock().now_us(),
                answer,
            });
            if answer == Answer::Refused {
                write.write_all(b"550 5.1.1 no such mailbox\r\n").await?;
            } else {
                write.write_all(b"451 4.3.0 try again later\r\n").await?;
            }
        } else if upper.starts_with("DATA") {
            write.write_all(b"354 go ahead\r\n").await?;
            let mut message_id = None;
            let mut size = 0;
            loop {
                line.clear();
                if lines.read_line(&mut line).await? == 0 {
                    return Ok(()); // the client went away before the final dot: nothing sent
                }
                size += line.len();
                if size > SMTP_BYTES_MAX {
                    return Ok(());
                }
                if line == ".\r\n" || line == ".\n" {
                    break;
                }
                if message_id.is_none() && line.to_ascii_lowercase().starts_with("message-id:") {
                    message_id = Some(line["message-id:".len()..].trim().to_owned());
                }
            }
            let stall = dice.roll() == Answer::TimedOut;
            recorder.push(Effect {
                channel: Channel::Smtp,
                lane: lane_of(&key).to_owned(),
                key: key.clone(),
                message_id,
                started_us,
                ended_us: recorder.clock().now_us(),
                answer: if stall {
                    Answer::TimedOut
                } else {
                    Answer::Delivered
                },
            });
            if stall {
                tokio::time::sleep(STALL).await;
                return Ok(());
            }
            write.write_all(b"250 2.0.0 queued\r\n").await?;
        } else if upper.starts_with("RSET") || upper.starts_with("NOOP") {
            write.write_all(b"250 OK\r\n").await?;
        } else if upper.starts_with("QUIT") {
            write.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else {
            write.write_all(b"502 not implemented\r\n").await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_their_lane() {
        let key = key_for("mail-12", 34);
        assert_eq!(key, "mail-12.0000034");
        assert_eq!(lane_of(&key), "mail-12");
        assert_eq!(lane_of("nodot"), "nodot");
    }

    #[test]
    fn dice_that_are_off_always_deliver() {
        let dice = FaultDice::new(1000, 0, 0);
        assert_eq!(dice.roll(), Answer::Refused);
        dice.enabled.store(false, Ordering::Relaxed);
        assert_eq!(dice.roll(), Answer::Delivered);
    }
}
