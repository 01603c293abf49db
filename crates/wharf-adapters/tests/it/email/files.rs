//! The file transport (one well-formed `.eml` per delivered action) and the shared adapter
//! conformance suite.

use super::*;

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
