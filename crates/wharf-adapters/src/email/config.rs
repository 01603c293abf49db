//! The `[email]` table of `wharf.toml`: where mail goes and how long each step may take.
//!
//! Owns: [`EmailConfig`], its defaults and bounds, and the choice between the SMTP relay and
//! the `.eml` file transport. Must not know: notices, the outbox, or how SMTP is spoken.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use lettre::message::Mailbox;
use serde::Deserialize;

use super::error::Error;
use super::message::is_dot_atom;

/// Longest any single SMTP step may be allowed to take, and the longest whole attempt. The
/// executor's fence margin (default 60 s) must cover the whole call, so minutes-long RFC 5321
/// timeouts cannot apply here; a relay that needs more than this is treated as unavailable.
pub const STEP_TIMEOUT_MS_MAX: u64 = 10 * 60 * 1_000;

/// Shortest whole attempt. The adapter keeps 2 s of the call timeout back to answer before the
/// executor cuts it off; below 5 s too little would be left for a connect and a few replies.
pub const CALL_TIMEOUT_MS_MIN: u64 = 5_000;

/// How the connection to the relay is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TlsMode {
    /// Plain text all the way. Only for a relay on the same host or a trusted network: any
    /// credentials are sent in the clear.
    None,
    /// Plain connection upgraded with `STARTTLS` before anything else is said (port 587). The
    /// default: a relay that does not offer it is treated as unavailable, never used in clear.
    #[default]
    Starttls,
    /// TLS from the first byte (port 465, "SMTPS").
    Implicit,
}

impl TlsMode {
    /// The customary port for the mode.
    pub const fn default_port(self) -> u16 {
        match self {
            TlsMode::None => 25,
            TlsMode::Starttls => 587,
            TlsMode::Implicit => 465,
        }
    }
}

/// The `[email]` table. Every field has a default; with no `relay_host` mail is written as
/// `.eml` files into the adapter's mail directory (`<data-dir>/mail` under `wharf serve`).
///
/// ```toml
/// [email]
/// relay_host = "smtp.example.com"
/// tls = "starttls"            # none | starttls | implicit
/// username = "wharf"
/// password = "…"
/// from = "Example <noreply@example.com>"
/// message_id_domain = "example.com"
/// ```
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmailConfig {
    /// The relay's host name or address. `None` selects the file transport.
    pub relay_host: Option<String>,
    /// The relay's port; the mode's customary port (25, 587, 465) when `None`.
    pub relay_port: Option<u16>,
    /// Connection protection.
    pub tls: TlsMode,
    /// Login name; `username` and `password` come together or not at all.
    pub username: Option<String>,
    /// Login password. Never printed by `Debug`.
    pub password: Option<String>,
    /// Name sent in `EHLO`; the machine's host name when `None`.
    pub hello_name: Option<String>,
    /// TCP connect (and TLS handshake for `implicit`).
    pub connect_timeout_ms: u64,
    /// Each reply before the message body: greeting with `EHLO`, `STARTTLS`, `AUTH`, `MAIL`,
    /// `RCPT`, `DATA`.
    pub command_timeout_ms: u64,
    /// Sending the body and reading the relay's reply to it. The longest step: relays run
    /// their content filters here. Running out of it is Uncertain, never a retry.
    pub data_timeout_ms: u64,
    /// The whole attempt, notice preparation included. Must stay below the executor's fence
    /// margin (default 60 s) so a call that passed the fence ends before its lease does.
    pub call_timeout_ms: u64,
    /// The `From` mailbox, e.g. `Example <noreply@example.com>`.
    pub from: String,
    /// The right-hand side of every `Message-ID` (`<hash@domain>`). Keep it stable: a change
    /// gives a queued retry a different id than its first attempt had.
    pub message_id_domain: String,
}

impl Default for EmailConfig {
    fn default() -> Self {
        EmailConfig {
            relay_host: None,
            relay_port: None,
            tls: TlsMode::default(),
            username: None,
            password: None,
            hello_name: None,
            // A relay that has not accepted TCP within 10 s is down for our purposes; the next
            // attempt comes with the kind's backoff.
            connect_timeout_ms: 10_000,
            // Replies before the body are cheap for a healthy relay (milliseconds); 10 s leaves
            // room for a slow DNS-based check at RCPT.
            command_timeout_ms: 10_000,
            // The reply to the final dot is where relays scan content; 30 s still leaves the
            // connect and command steps room inside the call timeout.
            data_timeout_ms: 30_000,
            // 10 s under the executor's default 60 s fence margin: room to record the outcome
            // before the lease could run out.
            call_timeout_ms: 50_000,
            from: "wharf <wharf@localhost>".to_owned(),
            message_id_domain: "wharf.local".to_owned(),
        }
    }
}

impl fmt::Debug for EmailConfig {
    // The password must never reach a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmailConfig")
            .field("relay_host", &self.relay_host)
            .field("relay_port", &self.relay_port)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("hello_name", &self.hello_name)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("command_timeout_ms", &self.command_timeout_ms)
            .field("data_timeout_ms", &self.data_timeout_ms)
            .field("call_timeout_ms", &self.call_timeout_ms)
            .field("from", &self.from)
            .field("message_id_domain", &self.message_id_domain)
            .finish()
    }
}

/// A relay, resolved from the configuration.
#[derive(Clone)]
pub(crate) struct Relay {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) tls: TlsMode,
    pub(crate) credentials: Option<(String, String)>,
    pub(crate) hello_name: Option<String>,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) data_timeout: Duration,
}

impl fmt::Debug for Relay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Relay")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("login", &self.credentials.is_some())
            .finish_non_exhaustive()
    }
}

/// Where delivered mail goes.
#[derive(Debug, Clone)]
pub(crate) enum Transport {
    /// An SMTP relay.
    Smtp(Relay),
    /// One `.eml` file per message in this directory.
    Files(PathBuf),
}

/// A checked configuration: everything the adapter needs, parsed once.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) transport: Transport,
    pub(crate) from: Mailbox,
    pub(crate) message_id_domain: String,
    pub(crate) call_timeout_ms: u64,
}

fn timeout(name: &'static str, ms: u64) -> Result<Duration, Error> {
    if !(1..=STEP_TIMEOUT_MS_MAX).contains(&ms) {
        return Err(Error::Config(format!(
            "{name} must be 1..={STEP_TIMEOUT_MS_MAX}, is {ms}"
        )));
    }
    Ok(Duration::from_millis(ms))
}

impl EmailConfig {
    /// Whether an SMTP relay is configured (otherwise mail goes to `.eml` files).
    pub fn has_relay(&self) -> bool {
        self.relay_host.is_some()
    }

    /// Checks every field; `mail_dir` is where the file transport writes when no relay is set.
    pub(crate) fn settings(&self, mail_dir: Option<PathBuf>) -> Result<Settings, Error> {
        let from: Mailbox = self
            .from
            .parse()
            .map_err(|e| Error::Config(format!("from {:?} is not a mailbox: {e}", self.from)))?;
        if !is_dot_atom(&self.message_id_domain) || self.message_id_domain.len() > 255 {
            return Err(Error::Config(format!(
                "message_id_domain {:?} must be a dot-atom (letters, digits, dots) of at most 255 bytes",
                self.message_id_domain
            )));
        }
        let connect_timeout = timeout("connect_timeout_ms", self.connect_timeout_ms)?;
        let command_timeout = timeout("command_timeout_ms", self.command_timeout_ms)?;
        let data_timeout = timeout("data_timeout_ms", self.data_timeout_ms)?;
        timeout("call_timeout_ms", self.call_timeout_ms)?;
        if self.call_timeout_ms < CALL_TIMEOUT_MS_MIN {
            return Err(Error::Config(format!(
                "call_timeout_ms must be at least {CALL_TIMEOUT_MS_MIN}, is {}",
                self.call_timeout_ms
            )));
        }
        let credentials = match (&self.username, &self.password) {
            (Some(u), Some(p)) => Some((u.clone(), p.clone())),
            (None, None) => None,
            _ => {
                return Err(Error::Config(
                    "username and password come together or not at all".to_owned(),
                ));
            }
        };
        let transport = match &self.relay_host {
            Some(host) => {
                if host.is_empty() {
                    return Err(Error::Config("relay_host is empty".to_owned()));
                }
                if self.relay_port == Some(0) {
                    return Err(Error::Config("relay_port 0 is not a port".to_owned()));
                }
                Transport::Smtp(Relay {
                    host: host.clone(),
                    port: self.relay_port.unwrap_or(self.tls.default_port()),
                    tls: self.tls,
                    credentials,
                    hello_name: self.hello_name.clone(),
                    connect_timeout,
                    command_timeout,
                    data_timeout,
                })
            }
            None => Transport::Files(mail_dir.ok_or_else(|| {
                Error::Config(
                    "no relay_host is configured and no mail directory was given".to_owned(),
                )
            })?),
        };
        Ok(Settings {
            transport,
            from,
            message_id_domain: self.message_id_domain.clone(),
            call_timeout_ms: self.call_timeout_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<EmailConfig, String> {
        toml::from_str(toml_text).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_select_the_file_transport() {
        let cfg = EmailConfig::default();
        assert!(!cfg.has_relay());
        let s = cfg.settings(Some(PathBuf::from("/tmp/mail"))).unwrap();
        assert!(matches!(s.transport, Transport::Files(_)));
        assert!(cfg.settings(None).is_err(), "files need a directory");
    }

    #[test]
    fn a_relay_gets_its_mode_port() {
        let check = |tls: &str, port: u16| {
            let cfg = parse(&format!("relay_host = \"mx\"\ntls = \"{tls}\"")).unwrap();
            match cfg.settings(None).unwrap().transport {
                Transport::Smtp(r) => assert_eq!(r.port, port, "{tls}"),
                Transport::Files(_) => panic!("relay expected"),
            }
        };
        check("none", 25);
        check("starttls", 587);
        check("implicit", 465);
    }

    #[test]
    fn bad_tables_are_refused() {
        assert!(parse(r#"relay = "mx""#).is_err(), "unknown field");
        assert!(parse(r#"tls = "ssl""#).is_err(), "unknown mode");
        let refused = |text: &str| {
            let cfg = parse(text).unwrap();
            assert!(cfg.settings(Some(PathBuf::from("/m"))).is_err(), "{text}");
        };
        refused(r#"username = "u""#);
        refused(r#"from = "not a mailbox""#);
        refused(r#"message_id_domain = "has space""#);
        refused(r#"message_id_domain = """#);
        refused("connect_timeout_ms = 0");
        refused("data_timeout_ms = 600001");
        refused("call_timeout_ms = 4999");
        refused(r#"relay_host = """#);
        refused("relay_host = \"mx\"\nrelay_port = 0");
    }

    #[test]
    fn debug_never_shows_the_password() {
        let cfg = EmailConfig {
            password: Some("hunter2".to_owned()),
            username: Some("u".to_owned()),
            ..EmailConfig::default()
        };
        assert!(!format!("{cfg:?}").contains("hunter2"));
    }
}
