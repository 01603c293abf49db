//! The SMTP phase rules (SPEC §2.5), one scripted relay per case: the end state, and the
//! copies the relay received.

use super::*;

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
