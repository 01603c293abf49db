//! A scripted SMTP server on loopback, for the email tests: each test says how the server
//! answers at every step, and reads back what it saw (connections, commands, whole messages).
//!
//! Owns: a small RFC 5321 server side (greeting, EHLO, AUTH PLAIN, MAIL, RCPT, DATA with
//! dot-unstuffing, RSET, NOOP, QUIT) that does exactly what its [`Script`] says. Must not know:
//! wharf. It is a stand-in for a relay, so it checks nothing a relay would not.
//!
//! It never sleeps: a stalled step holds the connection open until the client gives up and
//! closes it, so a test waits exactly as long as the client's own timeout.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Longest line the server reads; a real relay allows 1000 bytes for commands and body lines.
const LINE_BYTES_MAX: usize = 64 * 1024;
/// Longest message it keeps, so a runaway client cannot fill the test's memory.
const MESSAGE_BYTES_MAX: usize = 4 * 1024 * 1024;

/// What the server does at one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Answer with this code (2xx/3xx go on, 4xx/5xx refuse the step).
    Reply(u16),
    /// Close the connection without answering.
    Drop,
    /// Never answer; wait for the client to close.
    Stall,
}

/// How one connection goes. The default accepts everything.
#[derive(Debug, Clone)]
pub struct Script {
    /// The greeting (220 to go on).
    pub greeting: Step,
    /// Extra EHLO keywords, e.g. `STARTTLS`, `8BITMIME`.
    pub extensions: Vec<&'static str>,
    /// The login it requires (advertised as `AUTH PLAIN`); any other credentials get 535.
    pub login: Option<(&'static str, &'static str)>,
    /// The answer to STARTTLS (the server has no certificate, so only a refusal makes sense).
    pub starttls: Step,
    /// The answer to MAIL FROM.
    pub mail: Step,
    /// The answer to RCPT TO.
    pub rcpt: Step,
    /// The answer to DATA (354 to receive the body).
    pub data: Step,
    /// The answer after the body's final dot (250 to accept). The message is logged as
    /// received before this step, whatever it is: the bytes did reach the server.
    pub body: Step,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            greeting: Step::Reply(220),
            extensions: vec!["8BITMIME"],
            login: None,
            starttls: Step::Reply(454),
            mail: Step::Reply(250),
            rcpt: Step::Reply(250),
            data: Step::Reply(354),
            body: Step::Reply(250),
        }
    }
}

/// One message whose final dot reached the server.
#[derive(Debug, Clone)]
pub struct Received {
    /// The MAIL FROM address.
    pub from: String,
    /// The RCPT TO addresses.
    pub to: Vec<String>,
    /// The message, dot-unstuffed, CRLF line ends, without the final dot.
    pub data: Vec<u8>,
}

impl Received {
    /// The message as text.
    pub fn text(&self) -> String {
        String::from_utf8(self.data.clone()).expect("messages are UTF-8 in these tests")
    }
}

/// Everything the server saw.
#[derive(Debug, Clone, Default)]
pub struct Log {
    /// Connections accepted.
    pub connections: usize,
    /// Command lines, in order, with AUTH arguments blanked.
    pub commands: Vec<String>,
    /// Messages received (final dot seen).
    pub messages: Vec<Received>,
}

/// The scripts in force: connection `i` since the last (re)script follows `scripts[i]`, and
/// every later one the last script.
struct Scripts {
    scripts: Vec<Script>,
    used: usize,
}

impl Scripts {
    fn next(&mut self) -> Script {
        let script = self.scripts[self.used.min(self.scripts.len() - 1)].clone();
        self.used += 1;
        script
    }
}

/// A running server. It stops when dropped.
pub struct SmtpServer {
    addr: SocketAddr,
    log: Arc<Mutex<Log>>,
    scripts: Arc<Mutex<Scripts>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SmtpServer {
    /// Starts a server where every connection follows `script`.
    pub async fn start(script: Script) -> SmtpServer {
        SmtpServer::start_each(vec![script]).await
    }

    /// Starts a server where connection `i` follows `scripts[i]`, and every later one the last
    /// script.
    pub async fn start_each(scripts: Vec<Script>) -> SmtpServer {
        assert!(!scripts.is_empty());
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local address");
        let log = Arc::new(Mutex::new(Log::default()));
        let scripts = Arc::new(Mutex::new(Scripts { scripts, used: 0 }));
        let task = tokio::spawn({
            let log = log.clone();
            let scripts = scripts.clone();
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    log.lock().unwrap().connections += 1;
                    let script = scripts.lock().unwrap().next();
                    tokio::spawn(serve(stream, script, log.clone()));
                }
            }
        });
        SmtpServer {
            addr,
            log,
            scripts,
            task,
        }
    }

    /// Replaces the scripts; the next connection follows `scripts[0]`.
    pub fn rescript(&self, scripts: Vec<Script>) {
        assert!(!scripts.is_empty());
        *self.scripts.lock().unwrap() = Scripts { scripts, used: 0 };
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// A copy of the log so far.
    pub fn log(&self) -> Log {
        self.log.lock().unwrap().clone()
    }
}

/// A loopback port with nothing listening on it: bound, then released.
pub async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    listener.local_addr().expect("local address").port()
}

/// What to do after a step: go on with the conversation or end it.
enum Flow {
    Go,
    End,
}

struct Conn {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

impl Conn {
    async fn line(&mut self) -> Option<String> {
        let mut buf = Vec::new();
        let mut limited = (&mut self.reader).take(LINE_BYTES_MAX as u64);
        match limited.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(String::from_utf8_lossy(&buf).into_owned()),
        }
    }

    async fn send(&mut self, text: &str) -> bool {
        self.writer.write_all(text.as_bytes()).await.is_ok() && self.writer.flush().await.is_ok()
    }

    /// Carries out a step: `ok_text` follows a positive code.
    async fn step(&mut self, step: Step, ok_text: &str) -> Flow {
        match step {
            Step::Reply(code) if code < 400 => {
                if self.send(&format!("{code} {ok_text}\r\n")).await {
                    Flow::Go
                } else {
                    Flow::End
                }
            }
            Step::Reply(code) => {
                let _ = self.send(&format!("{code} scripted refusal\r\n")).await;
                Flow::Go
            }
            Step::Drop => Flow::End,
            Step::Stall => {
                // Hold the connection until the client closes it.
                while self.line().await.is_some() {}
                Flow::End
            }
        }
    }
}

async fn serve(stream: TcpStream, script: Script, log: Arc<Mutex<Log>>) {
    let (read, writer) = stream.into_split();
    let mut conn = Conn {
        reader: BufReader::new(read),
        writer,
    };
    match script.greeting {
        Step::Reply(220) => {
            if !conn.send("220 scripted.test ESMTP\r\n").await {
                return;
            }
        }
        other => {
            // A refusing greeting ends the session, as RFC 5321 §3.1 says a 554 (or 421) does.
            let _ = conn.step(other, "").await;
            return;
        }
    }
    let mut authenticated = script.login.is_none();
    let mut from = None::<String>;
    let mut to = Vec::new();
    while let Some(line) = conn.line().await {
        let command = line.trim_end_matches(['\r', '\n']).to_owned();
        let upper = command.to_ascii_uppercase();
        log.lock()
            .unwrap()
            .commands
            .push(if upper.starts_with("AUTH") {
                "AUTH ***".to_owned()
            } else {
                command.clone()
            });
        let flow = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
            let mut lines = vec!["scripted.test".to_owned()];
            lines.extend(script.extensions.iter().map(|e| (*e).to_owned()));
            if script.login.is_some() {
                lines.push("AUTH PLAIN".to_owned());
            }
            let mut reply = String::new();
            for (i, l) in lines.iter().enumerate() {
                let sep = if i + 1 == lines.len() { ' ' } else { '-' };
                reply.push_str(&format!("250{sep}{l}\r\n"));
            }
            if conn.send(&reply).await {
                Flow::Go
            } else {
                Flow::End
            }
        } else if upper.starts_with("STARTTLS") {
            conn.step(script.starttls, "go ahead").await
        } else if upper.starts_with("AUTH PLAIN") {
            let given = command.split_whitespace().nth(2).unwrap_or_default();
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(given)
                .unwrap_or_default();
            let ok = script.login.is_some_and(|(user, password)| {
                decoded == format!("\0{user}\0{password}").into_bytes()
            });
            authenticated |= ok;
            let reply = if ok {
                "235 2.7.0 ok\r\n"
            } else {
                "535 5.7.8 bad credentials\r\n"
            };
            if conn.send(reply).await {
                Flow::Go
            } else {
                Flow::End
            }
        } else if upper.starts_with("MAIL FROM:") {
            if !authenticated {
                let _ = conn.send("530 5.7.0 authentication required\r\n").await;
                Flow::Go
            } else {
                let flow = conn.step(script.mail, "ok").await;
                if script.mail == Step::Reply(250) {
                    from = Some(address_of(&command));
                    to.clear();
                }
                flow
            }
        } else if upper.starts_with("RCPT TO:") {
            let flow = conn.step(script.rcpt, "ok").await;
            if script.rcpt == Step::Reply(250) {
                to.push(address_of(&command));
            }
            flow
        } else if upper == "DATA" {
            if from.is_none() || to.is_empty() {
                let _ = conn.send("503 5.5.1 no valid recipients\r\n").await;
                Flow::Go
            } else {
                match conn.step(script.data, "end with <CRLF>.<CRLF>").await {
                    Flow::End => Flow::End,
                    Flow::Go if script.data != Step::Reply(354) => Flow::Go,
                    Flow::Go => {
                        let Some(data) = read_body(&mut conn).await else {
                            return;
                        };
                        log.lock().unwrap().messages.push(Received {
                            from: from.take().unwrap_or_default(),
                            to: std::mem::take(&mut to),
                            data,
                        });
                        conn.step(script.body, "2.0.0 queued").await
                    }
                }
            }
        } else if upper == "RSET" {
            from = None;
            to.clear();
            if conn.send("250 ok\r\n").await {
                Flow::Go
            } else {
                Flow::End
            }
        } else if upper == "NOOP" {
            if conn.send("250 ok\r\n").await {
                Flow::Go
            } else {
                Flow::End
            }
        } else if upper == "QUIT" {
            let _ = conn.send("221 bye\r\n").await;
            Flow::End
        } else {
            if conn.send("500 5.5.2 unknown command\r\n").await {
                Flow::Go
            } else {
                Flow::End
            }
        };
        if let Flow::End = flow {
            return;
        }
    }
}

/// The address inside `MAIL FROM:<a@b> …` or `RCPT TO:<a@b>`.
fn address_of(command: &str) -> String {
    let start = command.find('<').map_or(0, |i| i + 1);
    let end = command[start..]
        .find('>')
        .map_or(command.len(), |i| start + i);
    command[start..end].to_owned()
}

/// Reads a message body up to the final dot, undoing dot-stuffing. `None` when the client
/// closed before the final dot (nothing was received).
async fn read_body(conn: &mut Conn) -> Option<Vec<u8>> {
    let mut data = Vec::new();
    loop {
        let line = conn.line().await?;
        if line == ".\r\n" || line == ".\n" {
            return Some(data);
        }
        let unstuffed = line.strip_prefix('.').unwrap_or(&line);
        if data.len() + unstuffed.len() <= MESSAGE_BYTES_MAX {
            data.extend_from_slice(unstuffed.as_bytes());
        }
    }
}
