//! Email adapter tests: the real executor on real PostgreSQL, talking SMTP over loopback TCP to
//! a scripted server (`email/server.rs`) that each test configures, or writing `.eml` files.
//!
//! Every SMTP case checks two things: the state the action ends in (the classification rule),
//! and what the server's log shows it received: never two copies for one action. Nothing
//! sleeps; the one timeout case waits for the client's own 300 ms data timeout.

mod server;

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
    Draft, EmailAdapter, EmailConfig, EmailEnqueued, EmailError, MessageNotice, Notice,
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

#[tokio::test]
async fn accepted_message_is_done_with_exactly_one_copy() {
    let smtp = SmtpServer::start(Script::default()).await;
    let s = setup(relay(smtp.port())).await;
    let id = s.send("report:1", TO, 3).await;
    s.drain().await;

    let view = s.view(id).await;
    assert_ended(&view, ActionState::Done, StopReason::Done, None);
    let expected_id = message_id("report:1", DOMAIN);
    assert_eq!(view.readback_ref.as_deref(), Some(expected_id.as_str()));
    assert_eq!(view.attempt, 1);

    let log = smtp.log();
    assert_eq!(log.connections, 1);
    assert_eq!(log.messages.len(), 1);
    let received = &log.messages[0];
    assert_eq!(received.from, "wharf@example.com");
    assert_eq!(received.to, vec![TO.to_owned()]);
    let (headers, body) = parse_message(&received.text());
    assert_eq!(header(&headers, "Message-ID"), vec![expected_id.as_str()]);
    assert_eq!(header(&headers, "To"), vec!["Ada <ada@example.com>"]);
    assert_eq!(header(&headers, "Subject"), vec!["Your report"]);
    assert_eq!(header(&headers, "Auto-Submitted"), vec!["auto-generated"]);
    assert_eq!(header(&headers, "Date").len(), 1);
    // The lone dot in the text survived dot-stuffing both ways.
    assert!(body.contains("\r\n.\r\n"), "{body:?}");
    assert_eq!(
        log.commands.last().map(String::as_str),
        Some("QUIT"),
        "{:?}",
        log.commands
    );

    // Draining again sends nothing.
    s.drain().await;
    assert_eq!(smtp.log().connections, 1);
}

#[tokio::test]
async fn rcpt_451_is_retried_and_fails_when_attempts_run_out() {
    let smtp = SmtpServer::start(Script {
        rcpt: Step::Reply(451),
        ..Script::default()
    })
    .await;
    let s = setup(relay(smtp.port())).await;
    let id = s.send("k", TO, 3).await;

    s.run_once().await;
    assert_waiting_for_retry(&s.view(id).await, 1, "smtp.rcpt.451");

    s.drain().await;
    let view = s.view(id).await;
    assert_ended(
        &view,
        ActionState::Failed,
        StopReason::AttemptsExhausted,
        Some("smtp.rcpt.451"),
    );
    assert_eq!(view.attempt, 3);
    let log = smtp.log();
    assert_eq!(log.connections, 3);
    assert_eq!(log.messages.len(), 0);
    assert!(!log.commands.iter().any(|c| c == "DATA"));
}

#[tokio::test]
async fn rcpt_550_fails_at_once() {
    let smtp = SmtpServer::start(Script {
        rcpt: Step::Reply(550),
        ..Script::default()
    })
    .await;
    let s = setup(relay(smtp.port())).await;
    let id = s.send("k", TO, 3).await;
    s.drain().await;

    let view = s.view(id).await;
    assert_ended(
        &view,
        ActionState::Failed,
        StopReason::ProviderRefused,
        Some("smtp.rcpt.550"),
    );
    assert_eq!(view.attempt, 1);
    assert_eq!(smtp.log().connections, 1);
    assert_eq!(smtp.log().messages.len(), 0);
}

#[tokio::test]
async fn greeting_421_is_retried_and_the_retry_delivers_once() {
    let smtp = SmtpServer::start_each(vec![
        Script {
            greeting: Step::Reply(421),
            ..Script::default()
        },
        Script::default(),
    ])
    .await;
    let s = setup(relay(smtp.port())).await;
    let id = s.send("k", TO, 3).await;

    s.run_once().await;
    assert_waiting_for_retry(&s.view(id).await, 1, "smtp.greeting.421");

    s.drain().await;
    let view = s.view(id).await;
    assert_ended(&view, ActionState::Done, StopReason::Done, None);
    assert_eq!(view.attempt, 2);
    let log = smtp.log();
    assert_eq!(log.connections, 2);
    assert_eq!(log.messages.len(), 1);
    let (headers, _) = parse_message(&log.messages[0].text());
    assert_eq!(
        header(&headers, "Message-ID"),
        vec![message_id("k", DOMAIN).as_str()]
    );
}

#[tokio::test]
async fn auth_failure_is_retried_and_never_reaches_mail() {
    let smtp = SmtpServer::start(Script {
        login: Some(("wharf", "right")),
        ..Script::default()
    })
    .await;
    let s = setup(EmailConfig {
        username: Some("wharf".to_owned()),
        password: Some("wrong".to_owned()),
        ..relay(smtp.port())
    })
    .await;
    let id = s.send("k", TO, 2).await;

    s.run_once().await;
    assert_waiting_for_retry(&s.view(id).await, 1, "smtp.auth.535");
    s.drain().await;
    assert_ended(
        &s.view(id).await,
        ActionState::Failed,
        StopReason::AttemptsExhausted,
        Some("smtp.auth.535"),
    );
    let log = smtp.log();
    assert_eq!(log.connections, 2);
    assert!(
        !log.commands.iter().any(|c| c.starts_with("MAIL")),
        "{:?}",
        log.commands
    );
    assert_eq!(log.messages.len(), 0);
}

#[tokio::test]
async fn the_right_login_delivers() {
    let smtp = SmtpServer::start(Script {
        login: Some(("wharf", "right")),
        ..Script::default()
    })
    .await;
    let s = setup(EmailConfig {
        username: Some("wharf".to_owned()),
        password: Some("right".to_owned()),
        ..relay(smtp.port())
    })
    .await;
    let id = s.send("k", TO, 2).await;
    s.drain().await;
    assert_ended(&s.view(id).await, ActionState::Done, StopReason::Done, None);
    assert_eq!(smtp.log().messages.len(), 1);
    assert!(smtp.log().commands.contains(&"AUTH ***".to_owned()));
}

#[tokio::test]
async fn a_drop_after_the_final_dot_is_uncertain_and_never_resent() {
    let smtp = SmtpServer::start(Script {
        body: Step::Drop,
        ..Script::default()
    })
    .await;
    let s = setup(relay(smtp.port())).await;
    let id = s.send("k", TO, 3).await;
    s.drain().await;

    assert_ended(
        &s.view(id).await,
        ActionState::Uncertain,
        StopReason::UncertainProvider,
        Some("smtp.body.no_reply"),
    );
    s.drain().await;
    let log = smtp.log();
    assert_eq!(log.connections, 1);
    assert_eq!(
        log.messages.len(),
        1,
        "the relay got it once, and only once"
    );
}

#[tokio::test]
async fn a_stall_after_the_final_dot_past_the_timeout_is_uncertain() {
    let smtp = SmtpServer::start(Script {
        body: Step::Stall,
        ..Script::default()
    })
    .await;
    let s = setup(EmailConfig {
        data_timeout_ms: 300,
        ..relay(smtp.port())
    })
    .await;
    let id = s.send("k", TO, 3).await;
    s.drain().await;

    assert_ended(
        &s.view(id).await,
        ActionState::Uncertain,
        StopReason::UncertainProvider,
        Some("smtp.body.timeout"),
    );
    s.drain().await;
    assert_eq!(smtp.log().connections, 1);
    assert_eq!(smtp.log().messages.len(), 1);
}

#[tokio::test]
async fn nothing_listening_is_retried_until_attempts_run_out() {
    let port = closed_port().await;
    let s = setup(relay(port)).await;
    let id = s.send("k", TO, 2).await;

    s.run_once().await;
    assert_waiting_for_retry(&s.view(id).await, 1, "smtp.connect.io");
    s.drain().await;
    assert_ended(
        &s.view(id).await,
        ActionState::Failed,
        StopReason::AttemptsExhausted,
        Some("smtp.connect.io"),
    );
}

#[tokio::test]
async fn a_drop_before_the_body_is_a_retry_that_delivers_once() {
    let smtp = SmtpServer::start_each(vec![
        Script {
            data: Step::Drop,
            ..Script::default()
        },
        Script::default(),
    ])
    .await;
    let s = setup(relay(smtp.port())).await;
    let id = s.send("k", TO, 3).await;

    s.run_once().await;
    assert_waiting_for_retry(&s.view(id).await, 1, "smtp.data.no_reply");
    s.drain().await;
    assert_ended(&s.view(id).await, ActionState::Done, StopReason::Done, None);
    assert_eq!(smtp.log().connections, 2);
    assert_eq!(smtp.log().messages.len(), 1);
}

#[tokio::test]
async fn replies_to_the_final_dot_5xx_fails_4xx_is_uncertain() {
    for (code, state, reason) in [
        (554, ActionState::Failed, StopReason::ProviderRefused),
        (451, ActionState::Uncertain, StopReason::UncertainProvider),
    ] {
        let smtp = SmtpServer::start(Script {
            body: Step::Reply(code),
            ..Script::default()
        })
        .await;
        let s = setup(relay(smtp.port())).await;
        let id = s.send("k", TO, 3).await;
        s.drain().await;
        let expected_code = format!("smtp.body.{code}");
        assert_ended(
            &s.view(id).await,
            state,
            reason,
            Some(expected_code.as_str()),
        );
        assert_eq!(smtp.log().connections, 1, "{code}");
        assert_eq!(smtp.log().messages.len(), 1, "{code}");
    }
}

#[tokio::test]
async fn starttls_is_required_and_never_falls_back_to_plain_text() {
    for (extensions, code) in [
        (vec!["8BITMIME"], "smtp.starttls.unsupported"),
        (vec!["8BITMIME", "STARTTLS"], "smtp.starttls.454"),
    ] {
        let smtp = SmtpServer::start(Script {
            extensions,
            ..Script::default()
        })
        .await;
        let s = setup(EmailConfig {
            tls: TlsMode::Starttls,
            ..relay(smtp.port())
        })
        .await;
        let id = s.send("k", TO, 3).await;
        s.run_once().await;
        assert_waiting_for_retry(&s.view(id).await, 1, code);
        let log = smtp.log();
        assert!(
            !log.commands.iter().any(|c| c.starts_with("MAIL")),
            "{:?}",
            log.commands
        );
        assert_eq!(log.messages.len(), 0);
    }
}

#[tokio::test]
async fn a_retry_after_the_recipient_unsubscribed_is_cancelled_without_contacting_the_relay() {
    let smtp = SmtpServer::start(Script {
        rcpt: Step::Reply(451),
        ..Script::default()
    })
    .await;
    let s = setup(relay(smtp.port())).await;
    let id = s.send("k", TO, 5).await;
    s.run_once().await;
    assert_waiting_for_retry(&s.view(id).await, 1, "smtp.rcpt.451");
    assert_eq!(smtp.log().connections, 1);

    // The person unsubscribes (a differently-cased address is the same person).
    assert!(suppress(&s.db.pool, "ADA@example.com").await.unwrap());
    s.drain().await;

    let view = s.view(id).await;
    assert_ended(
        &view,
        ActionState::Cancelled,
        StopReason::CancelledByAdapter,
        Some("recipient_suppressed"),
    );
    assert_eq!(view.attempt, 2);
    assert_eq!(
        smtp.log().connections,
        1,
        "the relay saw no second connection"
    );
    assert_eq!(smtp.log().messages.len(), 0);
}

#[tokio::test]
async fn enqueue_refuses_bad_events_and_skips_suppressed_recipients() {
    let smtp = SmtpServer::start(Script::default()).await;
    let s = setup(relay(smtp.port())).await;
    let count = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM wharf.action")
            .fetch_one(&s.db.pool)
            .await
            .unwrap()
    };

    let bad = EmailAdapter::request(
        MessageNotice::NAME,
        json!({"to": "nobody", "subject": "s", "text": "t"}),
        "k1",
    );
    let err = s
        .email
        .enqueue_in(&s.db.pool, &s.registry, bad)
        .await
        .unwrap_err();
    assert!(matches!(err, EmailError::InvalidEvent { .. }), "{err:?}");
    let unknown = EmailAdapter::request("no_such_notice", event(TO), "k2");
    let err = s
        .email
        .enqueue_in(&s.db.pool, &s.registry, unknown)
        .await
        .unwrap_err();
    assert!(matches!(err, EmailError::UnknownNotice(_)), "{err:?}");
    // The generic outbox path refuses them too, through the adapter's validate hook.
    let mut conn = s.db.pool.acquire().await.unwrap();
    let generic = EmailAdapter::request("no_such_notice", event(TO), "k3");
    let err = wharf::outbox::enqueue(&mut conn, &s.registry, generic)
        .await
        .unwrap_err();
    assert!(
        matches!(err, wharf::outbox::Error::PayloadRefused { .. }),
        "{err:?}"
    );
    drop(conn);

    suppress(&s.db.pool, TO).await.unwrap();
    let out = s
        .email
        .enqueue_in(
            &s.db.pool,
            &s.registry,
            EmailAdapter::request(MessageNotice::NAME, event(TO), "k4"),
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        EmailEnqueued::Withdrawn(ErrorCode::from_static("recipient_suppressed"))
    );
    assert_eq!(count().await, 0, "nothing was written");

    // Subscribed again: enqueued, delivered once, and the same key again changes nothing.
    assert!(unsuppress(&s.db.pool, TO).await.unwrap());
    let id = s.send("k4", TO, 3).await;
    assert_eq!(s.send("k4", TO, 3).await, id);
    assert_eq!(count().await, 1);
    s.drain().await;
    assert_eq!(smtp.log().messages.len(), 1);
    assert!(matches!(
        suppress(&s.db.pool, "not an address").await,
        Err(EmailError::InvalidAddress)
    ));
}

/// An application notice that reads its recipient from the application's own table when the
/// message is prepared, so an address change or a deleted account between attempts is seen.
struct AccountNotice;

#[async_trait]
impl Notice for AccountNotice {
    fn name(&self) -> &'static str {
        "account_digest"
    }

    fn validate(&self, event: &Value) -> Result<(), String> {
        event["account"]
            .as_i64()
            .map(|_| ())
            .ok_or_else(|| "needs an account id".to_owned())
    }

    async fn prepare(&self, conn: &mut PgConnection, event: &Value) -> Result<Draft, NoticeError> {
        let account = event["account"]
            .as_i64()
            .ok_or_else(|| NoticeError::Invalid("needs an account id".to_owned()))?;
        let email: Option<String> =
            sqlx::query_scalar("SELECT email FROM app_account WHERE id = $1")
                .bind(account)
                .fetch_optional(&mut *conn)
                .await?;
        let Some(email) = email else {
            return Err(NoticeError::Withdrawn(ErrorCode::from_static(
                "account_gone",
            )));
        };
        Ok(Draft {
            to: Recipient::address(email),
            subject: "Your weekly digest".to_owned(),
            text: "Nothing new.".to_owned(),
            html: Some("<p>Nothing new.</p>".to_owned()),
        })
    }
}

#[tokio::test]
async fn every_attempt_prepares_the_message_from_the_current_state() {
    let smtp = SmtpServer::start_each(vec![
        Script {
            rcpt: Step::Reply(451),
            ..Script::default()
        },
        Script {
            rcpt: Step::Reply(451),
            ..Script::default()
        },
        Script::default(),
    ])
    .await;
    let s = setup_with(relay(smtp.port()), None, vec![Arc::new(AccountNotice)]).await;
    sqlx::raw_sql("CREATE TABLE app_account (id bigint PRIMARY KEY, email text NOT NULL)")
        .execute(&s.db.pool)
        .await
        .unwrap();
    sqlx::raw_sql("INSERT INTO app_account VALUES (1, 'old@example.com'), (2, 'two@example.com')")
        .execute(&s.db.pool)
        .await
        .unwrap();
    let moved = s
        .enqueue(EmailAdapter::request(
            "account_digest",
            json!({"account": 1}),
            "digest:1",
        ))
        .await;
    let gone = s
        .enqueue(EmailAdapter::request(
            "account_digest",
            json!({"account": 2}),
            "digest:2",
        ))
        .await;
    // An account that does not exist at enqueue time: nothing is enqueued.
    let none = s
        .email
        .enqueue_in(
            &s.db.pool,
            &s.registry,
            EmailAdapter::request("account_digest", json!({"account": 3}), "digest:3"),
        )
        .await
        .unwrap();
    assert_eq!(
        none,
        EmailEnqueued::Withdrawn(ErrorCode::from_static("account_gone"))
    );

    s.run_once().await;
    assert_waiting_for_retry(&s.view(moved).await, 1, "smtp.rcpt.451");
    assert_waiting_for_retry(&s.view(gone).await, 1, "smtp.rcpt.451");

    // Meanwhile account 1 changes its address and account 2 is deleted.
    sqlx::raw_sql("UPDATE app_account SET email = 'new@example.com' WHERE id = 1; DELETE FROM app_account WHERE id = 2")
        .execute(&s.db.pool)
        .await
        .unwrap();
    s.drain().await;

    assert_ended(
        &s.view(moved).await,
        ActionState::Done,
        StopReason::Done,
        None,
    );
    assert_ended(
        &s.view(gone).await,
        ActionState::Cancelled,
        StopReason::CancelledByAdapter,
        Some("account_gone"),
    );
    let log = smtp.log();
    assert_eq!(log.messages.len(), 1);
    assert_eq!(log.messages[0].to, vec!["new@example.com".to_owned()]);
    assert_eq!(
        log.connections, 3,
        "two refused first attempts, one delivery"
    );
}

#[tokio::test]
async fn the_file_transport_writes_exactly_one_well_formed_file_per_delivered_action() {
    let dir = tempfile::tempdir().unwrap();
    let mail = dir.path().join("mail");
    let s = setup_with(EmailConfig::default(), Some(&mail), Vec::new()).await;
    assert!(!s.email.has_relay());
    let keys = ["welcome:1", "welcome:2", "report:1"];
    let mut ids = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        ids.push(s.send(key, &format!("user{i}@example.com"), 3).await);
    }
    // A repeated enqueue of the same email is the same action, so still one file.
    assert_eq!(s.send("welcome:1", "user0@example.com", 3).await, ids[0]);
    s.drain().await;
    s.drain().await;

    let mut names: Vec<String> = std::fs::read_dir(&mail)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names.len(),
        keys.len(),
        "one file per action, no temporary files left: {names:?}"
    );
    for (i, (key, id)) in keys.iter().zip(&ids).enumerate() {
        let view = s.view(*id).await;
        assert_ended(&view, ActionState::Done, StopReason::Done, None);
        let mid = message_id(key, "wharf.local");
        assert_eq!(view.readback_ref.as_deref(), Some(mid.as_str()));
        let name = format!("{}.eml", mid.trim_start_matches('<').trim_end_matches('>'));
        assert!(names.contains(&name), "{name} in {names:?}");
        let text = std::fs::read_to_string(mail.join(&name)).unwrap();
        let (headers, body) = parse_message(&text);
        assert_eq!(header(&headers, "Message-ID"), vec![mid.as_str()]);
        assert_eq!(header(&headers, "From"), vec!["wharf <wharf@localhost>"]);
        let to = format!("Ada <user{i}@example.com>");
        assert_eq!(header(&headers, "To"), vec![to.as_str()]);
        assert_eq!(header(&headers, "Subject"), vec!["Your report"]);
        assert_eq!(
            header(&headers, "Content-Type"),
            vec!["text/plain; charset=utf-8"]
        );
        assert_eq!(header(&headers, "Date").len(), 1);
        assert!(body.starts_with("Hello Ada,"), "{body:?}");
    }
}

/// The shared adapter conformance suite, against the scripted server.
struct Harness {
    smtp: SmtpServer,
    /// Set by the Cancellation scenario: the harness notice then withdraws the message, as a
    /// notice does when its recipient lost the address.
    withdraw: Arc<Mutex<bool>>,
}

struct HarnessNotice {
    withdraw: Arc<Mutex<bool>>,
}

#[async_trait]
impl Notice for HarnessNotice {
    fn name(&self) -> &'static str {
        "conformance"
    }

    async fn prepare(
        &self,
        _conn: &mut PgConnection,
        _event: &Value,
    ) -> Result<Draft, NoticeError> {
        if *self.withdraw.lock().unwrap() {
            return Err(NoticeError::Withdrawn(ErrorCode::from_static(
                "recipient_gone",
            )));
        }
        Ok(Draft {
            to: Recipient::address(TO),
            subject: "Conformance".to_owned(),
            text: "Hello.".to_owned(),
            html: None,
        })
    }
}

impl ConformanceHarness for Harness {
    fn adapter(&self) -> Arc<dyn Adapter> {
        let config = EmailConfig {
            // The Timeout scenario waits for this.
            data_timeout_ms: 300,
            ..relay(self.smtp.port())
        };
        Arc::new(
            EmailAdapter::builder()
                .config(config)
                .notice(Arc::new(HarnessNotice {
                    withdraw: self.withdraw.clone(),
                }))
                .build()
                .expect("a valid adapter"),
        )
    }

    async fn script(&self, scenario: Scenario) {
        *self.withdraw.lock().unwrap() = scenario == Scenario::Cancellation;
        let scripts = match scenario {
            Scenario::Success | Scenario::Cancellation => vec![Script::default()],
            Scenario::ProvableRetry => vec![
                Script {
                    rcpt: Step::Reply(451),
                    ..Script::default()
                },
                Script::default(),
            ],
            Scenario::PermanentFailure => vec![Script {
                rcpt: Step::Reply(550),
                ..Script::default()
            }],
            Scenario::AmbiguousFailure => vec![Script {
                body: Step::Drop,
                ..Script::default()
            }],
            Scenario::Timeout => vec![Script {
                body: Step::Stall,
                ..Script::default()
            }],
        };
        self.smtp.rescript(scripts);
    }

    fn request(&self, idempotency_key: &str) -> ActionRequest {
        EmailAdapter::request("conformance", json!({}), idempotency_key)
    }

    async fn copies_received(&self, idempotency_key: &str) -> usize {
        let id = message_id(idempotency_key, DOMAIN);
        self.smtp
            .log()
            .messages
            .iter()
            .filter(|m| {
                let (headers, _) = parse_message(&m.text());
                header(&headers, "Message-ID") == vec![id.as_str()]
            })
            .count()
    }
}

#[tokio::test]
async fn the_email_adapter_passes_the_conformance_suite() {
    let harness = Harness {
        smtp: SmtpServer::start(Script::default()).await,
        withdraw: Arc::new(Mutex::new(false)),
    };
    run_conformance(&harness).await;
}

#[tokio::test]
async fn implicit_tls_against_a_plain_text_relay_is_a_retry() {
    // No process-wide rustls provider is installed here: lettre then uses ring itself.
    let smtp = SmtpServer::start(Script::default()).await;
    let s = setup(EmailConfig {
        tls: TlsMode::Implicit,
        relay_host: Some("localhost".to_owned()),
        ..relay(smtp.port())
    })
    .await;
    let id = s.send("k", TO, 3).await;
    s.run_once().await;
    assert_waiting_for_retry(&s.view(id).await, 1, "smtp.connect.tls");
    assert!(smtp.log().commands.iter().all(|c| !c.starts_with("MAIL")));
    assert_eq!(smtp.log().messages.len(), 0);
}

#[tokio::test]
async fn a_message_the_relay_can_never_carry_fails_before_anything_is_handed_over() {
    // An internationalised address needs SMTPUTF8, which the scripted relay does not offer.
    let smtp = SmtpServer::start(Script::default()).await;
    let s = setup(relay(smtp.port())).await;
    let id = s.send("k", "jörg@example.com", 3).await;
    s.drain().await;
    assert_ended(
        &s.view(id).await,
        ActionState::Failed,
        StopReason::ProviderRefused,
        Some("smtp.mail.unsupported"),
    );
    assert!(smtp.log().commands.iter().all(|c| !c.starts_with("MAIL")));
}

/// A notice whose preparation runs while the person's data is erased: the erasure lands
/// between the preparation and the fence, the worst moment for it.
struct ErasedWhilePreparing;

#[async_trait]
impl Notice for ErasedWhilePreparing {
    fn name(&self) -> &'static str {
        "erased_while_preparing"
    }

    async fn prepare(&self, conn: &mut PgConnection, event: &Value) -> Result<Draft, NoticeError> {
        if event["erase"].as_bool() == Some(true) {
            wharf::outbox::erase_subject(&mut *conn, "account-9")
                .await
                .map_err(|e| NoticeError::Invalid(e.to_string()))?;
        }
        Ok(Draft {
            to: Recipient::address(TO),
            subject: "s".to_owned(),
            text: "t".to_owned(),
            html: None,
        })
    }
}

#[tokio::test]
async fn an_action_erased_before_the_fence_never_reaches_the_relay() {
    let smtp = SmtpServer::start(Script::default()).await;
    let s = setup_with(
        relay(smtp.port()),
        None,
        vec![Arc::new(ErasedWhilePreparing)],
    )
    .await;
    // At enqueue the erasure finds nothing yet; before the attempt it deletes the action.
    let request =
        EmailAdapter::request("erased_while_preparing", json!({"erase": true}), "erase:9")
            .subject("account-9");
    let id = s.enqueue(request).await;
    s.drain().await;

    assert!(wharf::outbox::get(&s.db.pool, id).await.unwrap().is_none());
    assert_eq!(
        smtp.log().connections,
        0,
        "the fence refused: Abandoned, no connection"
    );
}
