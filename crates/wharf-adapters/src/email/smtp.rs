//! The SMTP conversation, one command at a time, so that every failure is known with the phase
//! it happened in; and the one function that turns (phase, failure) into an [`Outcome`].
//!
//! Owns: the conversation order, its per-step timeouts, and the classification table below.
//! Must not know: notices, the outbox's storage, or where the relay's settings came from.
//!
//! Why lettre's [`AsyncSmtpConnection`] and not lettre's transport or a client of our own: the
//! transport (`AsyncSmtpTransport::send`) runs MAIL … DATA … body as one call, so a failure
//! cannot be placed before or after the body, which is the whole difference between a safe
//! retry and a possible duplicate. The connection type lets us issue each command ourselves and
//! still reuses lettre's tested parts: the rustls (ring) handshake, EHLO parsing, AUTH
//! mechanisms and dot-stuffing. The one thing it hides, whether a missing reply was a closed
//! connection or garbage, does not change any classification (both are `no_reply`).
//!
//! | phase | what was said | failure ⇒ outcome |
//! |---|---|---|
//! | `connect` | TCP connect (and the TLS handshake for implicit TLS) | any ⇒ Retry |
//! | `greeting` | the relay's 220 and our EHLO | any ⇒ Retry |
//! | `starttls` | STARTTLS, handshake, EHLO again | any ⇒ Retry |
//! | `auth` | AUTH | any ⇒ Retry |
//! | `mail`, `rcpt`, `data` | MAIL FROM, RCPT TO, DATA (up to its 354) | 5xx or a message the relay can never carry ⇒ Failed; anything else ⇒ Retry |
//! | `body` | the message and its final dot, then the relay's reply | 5xx ⇒ Failed; anything else (4xx, closed, timeout, unreadable) ⇒ Uncertain |
//!
//! The first four phases refuse the *session*, not the message (a relay restarting, a wrong
//! password, an expired certificate): nothing was handed over, and an operator can fix the
//! cause, so they retry until the attempts run out, whatever the reply code. From `mail` on the
//! relay judges this message: 5xx is its final word. Once the body has gone out, only a clean
//! 5xx proves the relay kept nothing; a 4xx after the final dot is treated as Uncertain because
//! relays are known to answer 451 after they already queued the message (a content filter that
//! timed out), and a retry would then be a second copy.
//!
//! Codes are `smtp.<phase>.<what>` where `<what>` is the three-digit reply code or one of
//! `io`, `timeout`, `no_reply`, `tls`, `unsupported`, `unexpected`: stable, and never the
//! relay's text.

use std::future::Future;
use std::time::Duration;

use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, TlsParameters};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt};
use lettre::transport::smtp::extension::{ClientId, Extension, MailBodyParameter, MailParameter};
use tokio::net::TcpStream;
use tokio::time::Instant;
use wharf::outbox::{ErrorCode, Outcome};

use super::config::{Relay, TlsMode};
use super::message::Rendered;

/// How long a polite QUIT may take after the relay accepted the message. The message is the
/// relay's already; this only avoids leaving the relay a half-closed session.
const QUIT_TIMEOUT_MS: u64 = 1_000;

/// Where in the conversation a failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// TCP connect, and the handshake for implicit TLS.
    Connect,
    /// The relay's greeting and our EHLO.
    Greeting,
    /// STARTTLS, its handshake and the second EHLO.
    StartTls,
    /// AUTH.
    Auth,
    /// MAIL FROM.
    Mail,
    /// RCPT TO.
    Rcpt,
    /// DATA, up to the relay's 354.
    Data,
    /// The message and its final dot went out; waiting for the relay's verdict.
    Body,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Connect => "connect",
            Phase::Greeting => "greeting",
            Phase::StartTls => "starttls",
            Phase::Auth => "auth",
            Phase::Mail => "mail",
            Phase::Rcpt => "rcpt",
            Phase::Data => "data",
            Phase::Body => "body",
        }
    }
}

/// What went wrong in a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A negative reply (4xx or 5xx) with its code.
    Reply(u16),
    /// The connection failed (refused, reset, broken pipe).
    Io,
    /// The step's timeout ran out.
    Timeout,
    /// The reply was missing (the relay closed) or unreadable.
    NoReply,
    /// TLS could not be set up.
    Tls,
    /// The relay lacks something this message or session needs (STARTTLS, a common AUTH
    /// mechanism, SMTPUTF8 or 8BITMIME).
    Unsupported,
    /// A positive reply that is not the one the protocol calls for here.
    Unexpected,
}

impl Failure {
    fn label(self) -> String {
        match self {
            Failure::Reply(code) => code.to_string(),
            Failure::Io => "io".to_owned(),
            Failure::Timeout => "timeout".to_owned(),
            Failure::NoReply => "no_reply".to_owned(),
            Failure::Tls => "tls".to_owned(),
            Failure::Unsupported => "unsupported".to_owned(),
            Failure::Unexpected => "unexpected".to_owned(),
        }
    }

    fn of(e: &lettre::transport::smtp::Error) -> Failure {
        if let Some(code) = e.status() {
            Failure::Reply(u16::from(code))
        } else if e.is_timeout() {
            Failure::Timeout
        } else if e.is_tls() || handshake_failed(e) {
            Failure::Tls
        } else if e.is_client() {
            Failure::Unsupported
        } else if e.is_response() {
            Failure::NoReply
        } else {
            Failure::Io
        }
    }
}

/// lettre reports a failed TLS handshake as a connection error; underneath is the I/O error
/// tokio-rustls raises for every TLS-level failure (a bad certificate, a peer that does not
/// speak TLS), which is the only one of kind `InvalidData` on this path.
fn handshake_failed(e: &lettre::transport::smtp::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::InvalidData;
        }
        source = err.source();
    }
    false
}

/// A conversation that ended before the relay accepted the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stop {
    pub(crate) phase: Phase,
    pub(crate) failure: Failure,
}

impl Stop {
    /// `smtp.<phase>.<what>`.
    pub(crate) fn code(self) -> ErrorCode {
        let text = format!("smtp.{}.{}", self.phase.as_str(), self.failure.label());
        // Phases and labels are fixed lowercase words and digits, so this cannot fail; the
        // fallback keeps a bad future edit from panicking inside an attempt.
        ErrorCode::new(text).unwrap_or(ErrorCode::from_static("smtp"))
    }
}

/// The classification table of the module docs.
pub(crate) fn classify(stop: Stop) -> Outcome {
    let code = stop.code();
    let permanent = matches!(stop.failure, Failure::Reply(500..=599));
    match stop.phase {
        Phase::Connect | Phase::Greeting | Phase::StartTls | Phase::Auth => {
            Outcome::Retry { after: None, code }
        }
        Phase::Mail | Phase::Rcpt | Phase::Data => {
            if permanent || stop.failure == Failure::Unsupported {
                Outcome::Failed { code }
            } else {
                Outcome::Retry { after: None, code }
            }
        }
        Phase::Body => {
            if permanent {
                Outcome::Failed { code }
            } else {
                Outcome::Uncertain { code }
            }
        }
    }
}

/// Runs one step under `min(limit, deadline)`, and not at all once that has passed.
async fn step<T>(
    phase: Phase,
    limit: Duration,
    deadline: Instant,
    fut: impl Future<Output = Result<T, lettre::transport::smtp::Error>>,
) -> Result<T, Stop> {
    let until = (Instant::now() + limit).min(deadline);
    // `before`, not `timeout_at`: after a stop past the deadline the relay's reply is ready
    // together with the timer, and the next command (the body) must not go out.
    match crate::deadline::before(until, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(Stop {
            phase,
            failure: Failure::of(&e),
        }),
        Err(crate::deadline::Expired) => Err(Stop {
            phase,
            failure: Failure::Timeout,
        }),
    }
}

fn tls_parameters(relay: &Relay, phase: Phase) -> Result<TlsParameters, Stop> {
    TlsParameters::new(relay.host.clone()).map_err(|_| Stop {
        phase,
        failure: Failure::Tls,
    })
}

/// Connects, greets and (per the mode) secures the session.
async fn open(
    relay: &Relay,
    hello: &ClientId,
    deadline: Instant,
) -> Result<AsyncSmtpConnection, Stop> {
    let address = (relay.host.as_str(), relay.port);
    if relay.tls == TlsMode::Implicit {
        // lettre only offers implicit TLS as one call (connect, handshake, greeting, EHLO), so
        // its error kind tells the phase: a reply code or an unreadable reply came from the
        // greeting, everything else from connecting.
        let tls = tls_parameters(relay, Phase::Connect)?;
        let connecting = AsyncSmtpConnection::connect_tokio1(
            address,
            Some(relay.connect_timeout),
            hello,
            Some(tls),
            None,
        );
        return step(
            Phase::Connect,
            relay.connect_timeout + relay.command_timeout,
            deadline,
            connecting,
        )
        .await
        .map_err(|stop| match stop.failure {
            Failure::Reply(_) | Failure::NoReply => Stop {
                phase: Phase::Greeting,
                ..stop
            },
            _ => stop,
        });
    }
    let until = (Instant::now() + relay.connect_timeout).min(deadline);
    let tcp = match tokio::time::timeout_at(until, TcpStream::connect(address)).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(_)) => {
            return Err(Stop {
                phase: Phase::Connect,
                failure: Failure::Io,
            });
        }
        Err(_) => {
            return Err(Stop {
                phase: Phase::Connect,
                failure: Failure::Timeout,
            });
        }
    };
    let _ = tcp.set_nodelay(true);
    let mut conn = step(
        Phase::Greeting,
        relay.command_timeout,
        deadline,
        AsyncSmtpConnection::connect_with_transport(Box::new(tcp), hello),
    )
    .await?;
    if relay.tls == TlsMode::Starttls {
        // Never fall back to plain text: a relay that stops offering STARTTLS may be under a
        // downgrade attack, and it is in any case not the relay the operator configured.
        if !conn.can_starttls() {
            return Err(Stop {
                phase: Phase::StartTls,
                failure: Failure::Unsupported,
            });
        }
        let tls = tls_parameters(relay, Phase::StartTls)?;
        step(
            Phase::StartTls,
            relay.command_timeout,
            deadline,
            conn.starttls(tls, hello),
        )
        .await?;
    }
    Ok(conn)
}

/// Delivers one message to the relay. `Ok` means the relay answered 2xx to the final dot.
/// Every step runs under its own timeout and never past `deadline`.
pub(crate) async fn deliver(
    relay: &Relay,
    message: &Rendered,
    deadline: Instant,
) -> Result<(), Stop> {
    let hello = match &relay.hello_name {
        Some(name) => ClientId::Domain(name.clone()),
        None => ClientId::default(),
    };
    let mut conn = open(relay, &hello, deadline).await?;

    if let Some((user, password)) = &relay.credentials {
        let credentials = Credentials::new(user.clone(), password.clone());
        step(
            Phase::Auth,
            relay.command_timeout,
            deadline,
            conn.auth(&[Mechanism::Plain, Mechanism::Login], &credentials),
        )
        .await?;
    }

    // The same checks lettre's own `send` makes: a message the relay cannot carry is refused
    // here, before anything is handed over, and for good (Failed).
    let mut parameters = Vec::new();
    let ascii_addresses =
        message.envelope_from.to_string().is_ascii() && message.envelope_to.to_string().is_ascii();
    if !ascii_addresses {
        if !conn.server_info().supports_feature(Extension::SmtpUtfEight) {
            return Err(Stop {
                phase: Phase::Mail,
                failure: Failure::Unsupported,
            });
        }
        parameters.push(MailParameter::SmtpUtfEight);
    }
    if !message.bytes.is_ascii() {
        if !conn.server_info().supports_feature(Extension::EightBitMime) {
            return Err(Stop {
                phase: Phase::Mail,
                failure: Failure::Unsupported,
            });
        }
        parameters.push(MailParameter::Body(MailBodyParameter::EightBitMime));
    }
    step(
        Phase::Mail,
        relay.command_timeout,
        deadline,
        conn.command(Mail::new(Some(message.envelope_from.clone()), parameters)),
    )
    .await?;
    step(
        Phase::Rcpt,
        relay.command_timeout,
        deadline,
        conn.command(Rcpt::new(message.envelope_to.clone(), Vec::new())),
    )
    .await?;
    let go_ahead = step(
        Phase::Data,
        relay.command_timeout,
        deadline,
        conn.command(Data),
    )
    .await?;
    if !go_ahead.has_code(354) {
        // Any other positive reply leaves the relay in a state we cannot name; the body has
        // not been sent, so this is still safe to retry.
        return Err(Stop {
            phase: Phase::Data,
            failure: Failure::Unexpected,
        });
    }

    // From here on the relay may hold the message.
    let verdict = step(
        Phase::Body,
        relay.data_timeout,
        deadline,
        conn.message(&message.bytes),
    )
    .await?;
    if !(200..300).contains(&u16::from(verdict.code())) {
        return Err(Stop {
            phase: Phase::Body,
            failure: Failure::Unexpected,
        });
    }
    let quit_until = (Instant::now() + Duration::from_millis(QUIT_TIMEOUT_MS)).min(deadline);
    let _ = tokio::time::timeout_at(quit_until, conn.quit()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(phase: Phase, failure: Failure, expected: &str, code: &str) {
        let outcome = classify(Stop { phase, failure });
        assert_eq!(outcome.label(), expected, "{phase:?} {failure:?}");
        let got = match outcome {
            Outcome::Retry { code, .. }
            | Outcome::Failed { code }
            | Outcome::Uncertain { code }
            | Outcome::Cancelled { code } => code,
            other => panic!("{other:?}"),
        };
        assert_eq!(got.as_str(), code);
    }

    /// RELIABILITY.md finding 1: a holder stopped while it waits for the relay's go-ahead, past
    /// its deadline, must not send the body when it resumes (the lease may be another's by then).
    /// The stop is a task on the client's own thread that blocks it, as SIGSTOP would; the relay
    /// answers 354 during the stop, so the reply and the expired timer are ready together.
    #[tokio::test]
    async fn a_stop_past_the_deadline_before_the_go_ahead_keeps_the_body_from_going_out() {
        use std::io::{BufRead, BufReader, Write};
        use std::sync::Arc;

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(tokio::sync::Notify::new());
        let (seen_tx, seen_rx) = std::sync::mpsc::channel::<Vec<String>>();
        let stop_now = stop.clone();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut out = stream;
            let mut lines = Vec::new();
            let _ = out.write_all(b"220 relay\r\n");
            loop {
                let mut line = String::new();
                if !matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
                    break;
                }
                let command = line.to_ascii_uppercase();
                lines.push(line.trim_end().to_owned());
                let reply: &[u8] = if command.starts_with("EHLO") {
                    b"250 relay\r\n"
                } else if command.starts_with("DATA") {
                    stop_now.notify_one();
                    std::thread::sleep(Duration::from_millis(100));
                    b"354 go ahead\r\n"
                } else if line == ".\r\n"
                    || command.starts_with("MAIL")
                    || command.starts_with("RCPT")
                {
                    b"250 ok\r\n"
                } else if command.starts_with("QUIT") {
                    b"221 bye\r\n"
                } else {
                    continue;
                };
                let _ = out.write_all(reply);
            }
            let _ = seen_tx.send(lines);
        });
        tokio::spawn(async move {
            stop.notified().await;
            std::thread::sleep(Duration::from_millis(700));
        });

        let relay = Relay {
            host: "127.0.0.1".into(),
            port,
            tls: TlsMode::None,
            credentials: None,
            hello_name: None,
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
            data_timeout: Duration::from_secs(5),
        };
        let message = Rendered {
            message_id: "<stop@example.com>".into(),
            envelope_from: "from@example.com".parse().unwrap(),
            envelope_to: "to@example.com".parse().unwrap(),
            bytes: b"Subject: stopped\r\n\r\nbody\r\n".to_vec(),
        };
        let deadline = Instant::now() + Duration::from_millis(500);
        let stopped = deliver(&relay, &message, deadline).await.unwrap_err();
        assert_eq!(
            stopped,
            Stop {
                phase: Phase::Data,
                failure: Failure::Timeout
            }
        );
        let seen = seen_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(seen.iter().any(|l| l == "DATA"), "{seen:?}");
        assert!(
            !seen.iter().any(|l| l == "Subject: stopped" || l == "."),
            "the body went out after the deadline: {seen:?}"
        );
    }

    #[test]
    fn the_classification_table() {
        use Failure::*;
        use Phase::*;
        // Nothing handed over and the session refused: retry, whatever the code.
        check(Connect, Io, "retry", "smtp.connect.io");
        check(Connect, Timeout, "retry", "smtp.connect.timeout");
        check(Connect, Tls, "retry", "smtp.connect.tls");
        check(Greeting, Reply(421), "retry", "smtp.greeting.421");
        check(Greeting, Reply(554), "retry", "smtp.greeting.554");
        check(Greeting, NoReply, "retry", "smtp.greeting.no_reply");
        check(StartTls, Unsupported, "retry", "smtp.starttls.unsupported");
        check(StartTls, Reply(454), "retry", "smtp.starttls.454");
        check(Auth, Reply(535), "retry", "smtp.auth.535");
        check(Auth, Unsupported, "retry", "smtp.auth.unsupported");
        // The relay judges the message, before the body: 4xx retry, 5xx final.
        check(Mail, Reply(451), "retry", "smtp.mail.451");
        check(Mail, Reply(550), "failed", "smtp.mail.550");
        check(Mail, Unsupported, "failed", "smtp.mail.unsupported");
        check(Rcpt, Reply(451), "retry", "smtp.rcpt.451");
        check(Rcpt, Reply(550), "failed", "smtp.rcpt.550");
        check(Rcpt, Io, "retry", "smtp.rcpt.io");
        check(Rcpt, Timeout, "retry", "smtp.rcpt.timeout");
        check(Data, Reply(451), "retry", "smtp.data.451");
        check(Data, Reply(554), "failed", "smtp.data.554");
        check(Data, NoReply, "retry", "smtp.data.no_reply");
        check(Data, Unexpected, "retry", "smtp.data.unexpected");
        // After the body went out only a clean 5xx proves nothing was kept.
        check(Body, Reply(554), "failed", "smtp.body.554");
        check(Body, Reply(451), "uncertain", "smtp.body.451");
        check(Body, Io, "uncertain", "smtp.body.io");
        check(Body, Timeout, "uncertain", "smtp.body.timeout");
        check(Body, NoReply, "uncertain", "smtp.body.no_reply");
        check(Body, Unexpected, "uncertain", "smtp.body.unexpected");
    }
}
