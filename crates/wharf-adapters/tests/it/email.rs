//! Email adapter tests: the real executor on real PostgreSQL, talking SMTP over loopback TCP to
//! a scripted server (`email/server.rs`) that each test configures, or writing `.eml` files.
//!
//! Every SMTP case checks two things: the state the action ends in (the classification rule),
//! and what the server's log shows it received: never two copies for one action. Nothing
//! sleeps; the one timeout case waits for the client's own 300 ms data timeout.

mod files;
mod notices;
mod server;
mod smtp;

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use sqlx::PgConnection;
use wharf::outbox::{
    ActionRequest, ActionState, ActionView, Adapter, ErrorCode, Executor, ExecutorConfig, Registry,
    StopReason,
};
use wharf_adapters::email::{
    Draft, EmailAdapter, EmailConfig, EmailEnqueued, Error as EmailError, MessageNotice, Notice,
    NoticeError, Recipient, TlsMode, message_id, suppress, unsuppress,
};
use wharf_testkit::TestDb;
use wharf_testkit::conformance::{ConformanceHarness, Scenario, run_conformance};

use server::{Script, SmtpServer, Step, closed_port};

const DOMAIN: &str = "wharf.test";
const TO: &str = "ada@example.com";

/// A relay configuration for a scripted server on loopback. The step timeouts are generous:
/// only the stall case wants one to run out, and it sets its own.
fn relay(port: u16) -> EmailConfig {
    EmailConfig {
        relay_host: Some("127.0.0.1".to_owned()),
        relay_port: Some(port),
        tls: TlsMode::None,
        hello_name: Some("client.wharf.test".to_owned()),
        connect_timeout_ms: 5_000,
        command_timeout_ms: 5_000,
        data_timeout_ms: 5_000,
        from: "wharf <wharf@example.com>".to_owned(),
        message_id_domain: DOMAIN.to_owned(),
        ..EmailConfig::default()
    }
}

struct Setup {
    db: TestDb,
    email: Arc<EmailAdapter>,
    registry: Arc<Registry>,
    executor: Executor,
}

async fn setup_with(
    config: EmailConfig,
    mail_dir: Option<&Path>,
    notices: Vec<Arc<dyn Notice>>,
) -> Setup {
    let db = TestDb::new().await;
    let mut builder = EmailAdapter::builder()
        .config(config)
        .notice(Arc::new(MessageNotice));
    if let Some(dir) = mail_dir {
        builder = builder.mail_dir(dir);
    }
    for notice in notices {
        builder = builder.notice(notice);
    }
    let email = Arc::new(builder.build().expect("a valid adapter"));
    let mut registry = Registry::new();
    registry.register(email.clone()).expect("register email");
    let registry = Arc::new(registry);
    let mut config = ExecutorConfig::default();
    config.notify = false;
    let executor =
        Executor::new(db.pool.clone(), registry.clone(), config).expect("a valid executor");
    Setup {
        db,
        email,
        registry,
        executor,
    }
}

async fn setup(config: EmailConfig) -> Setup {
    setup_with(config, None, Vec::new()).await
}

fn event(to: &str) -> Value {
    json!({"to": to, "name": "Ada", "subject": "Your report", "text": "Hello Ada,\n.\nbye"})
}

impl Setup {
    /// Enqueues a `message` email to `to` with this key and attempt budget; its action id.
    async fn send(&self, key: &str, to: &str, max_attempts: u32) -> i64 {
        let mut request = EmailAdapter::request(MessageNotice::NAME, event(to), key);
        request.max_attempts = Some(max_attempts);
        self.enqueue(request).await
    }

    async fn enqueue(&self, request: ActionRequest) -> i64 {
        match self
            .email
            .enqueue_in(&self.db.pool, &self.registry, request)
            .await
            .expect("enqueue")
        {
            EmailEnqueued::Enqueued(e) => e.id,
            other => panic!("not enqueued: {other:?}"),
        }
    }

    async fn view(&self, id: i64) -> ActionView {
        wharf::outbox::get(&self.db.pool, id)
            .await
            .expect("get")
            .expect("the action exists")
    }

    /// Runs one claim round (the first attempt of a fresh action).
    async fn run_once(&self) {
        self.executor.run_once().await.expect("run once");
    }

    async fn drain(&self) {
        let report = self.executor.drain().await.expect("drain");
        assert!(report.finished, "{report:?}");
    }
}

#[track_caller]
fn assert_ended(view: &ActionView, state: ActionState, reason: StopReason, code: Option<&str>) {
    assert_eq!(view.state, state, "{view:?}");
    assert_eq!(view.stop_reason, Some(reason), "{view:?}");
    assert_eq!(view.error_code.as_deref(), code, "{view:?}");
    assert!(view.payload.is_none());
}

#[track_caller]
fn assert_waiting_for_retry(view: &ActionView, attempt: u32, code: &str) {
    assert_eq!(view.state, ActionState::Admitted, "{view:?}");
    assert_eq!(view.attempt, attempt, "{view:?}");
    assert_eq!(view.error_code.as_deref(), Some(code), "{view:?}");
    assert!(
        view.write_started_at.is_none(),
        "a proven retry clears the fence"
    );
}

/// Header name ⇒ value of an RFC 5322 message (folded lines joined), and its body.
fn parse_message(text: &str) -> (Vec<(String, String)>, String) {
    let (head, body) = text
        .split_once("\r\n\r\n")
        .expect("a blank line ends the headers");
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in head.split("\r\n") {
        assert!(!line.is_empty());
        if line.starts_with([' ', '\t']) {
            let last = headers.last_mut().expect("a folded line follows a header");
            last.1.push_str(line);
        } else {
            let (name, value) = line.split_once(':').expect("name: value");
            assert!(
                name.bytes().all(|b| b.is_ascii_graphic() && b != b':'),
                "header name {name:?}"
            );
            headers.push((name.to_owned(), value.trim().to_owned()));
        }
    }
    (headers, body.to_owned())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .collect()
}
