//! Notices: prepared at enqueue and again before every attempt, so a retry never reaches
//! someone who unsubscribed or lost the address; erasure before the fence.

use super::*;

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

/// A notice whose preparation runs while the person's data is erased (by another connection:
/// the notice's own is read-only): the erasure lands between the preparation and the fence,
/// the worst moment for it.
struct ErasedWhilePreparing {
    /// The application's pool, set once the test database exists.
    others: Arc<std::sync::OnceLock<sqlx::PgPool>>,
}

#[async_trait]
impl Notice for ErasedWhilePreparing {
    fn name(&self) -> &'static str {
        "erased_while_preparing"
    }

    async fn prepare(&self, _conn: &mut PgConnection, event: &Value) -> Result<Draft, NoticeError> {
        if event["erase"].as_bool() == Some(true) {
            let others = self.others.get().expect("set after setup");
            wharf::outbox::erase_subject(others, "account-9")
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
    let others = Arc::new(std::sync::OnceLock::new());
    let s = setup_with(
        relay(smtp.port()),
        None,
        vec![Arc::new(ErasedWhilePreparing {
            others: others.clone(),
        })],
    )
    .await;
    others.set(s.db.pool.clone()).unwrap();
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
