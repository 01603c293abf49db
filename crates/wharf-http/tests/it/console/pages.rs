//! Every console page and form over HTTP.

use wharf_http::console::ConsoleConfig;
use wharf_testkit::TestDb;

use super::*;

async fn audit_rows(db: &TestDb) -> Vec<(String, String, String, String)> {
    sqlx::query_as(
        // The console's rows of the one trail: those with a session role.
        "SELECT actor, role, operation, target FROM wharf.operator_audit WHERE role IS NOT NULL ORDER BY audit_id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap()
}

async fn action_state(db: &TestDb, id: i64) -> Option<String> {
    sqlx::query_scalar("SELECT state FROM wharf.action WHERE id = $1")
        .bind(id)
        .fetch_optional(&db.pool)
        .await
        .unwrap()
}

async fn stream_state(db: &TestDb) -> (String, String) {
    sqlx::query_as(
        "SELECT acknowledged_sequence::text, replay_floor::text FROM wharf.inbox_streams",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn signing_in_needs_a_configured_token_and_sets_a_strict_bounded_cookie() {
    let db = TestDb::new().await;
    let base = start(&db).await;

    // Not signed in: every page sends the browser to sign-in.
    let a = client()
        .get(format!("{base}/console"))
        .send()
        .await
        .unwrap();
    assert_eq!(a.status(), 303);
    assert_eq!(a.headers()[LOCATION], "/console/sign-in");
    let form = client()
        .get(format!("{base}/console/sign-in"))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200);
    assert!(form.text().await.unwrap().contains("name=\"token\""));

    for wrong in [
        "",
        "operator-secret",
        "OPERATOR-SECRET-7F3A",
        "Bearer operator-secret-7f3a",
    ] {
        let a = sign_in(&base, "ada", wrong, &[]).await;
        assert_eq!(a.status, 401, "{wrong:?}");
        assert!(a.headers.get(SET_COOKIE).is_none());
    }
    let a = sign_in(&base, "not an identity", OPERATOR_TOKEN, &[]).await;
    assert_eq!(a.status, 400);
    assert!(a.body.contains("operator"), "{}", a.body);
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.console_sessions")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(sessions, 0, "a refused sign-in stores nothing");
    assert!(audit_rows(&db).await.is_empty());

    let a = sign_in(&base, "ada", OPERATOR_TOKEN, &[]).await;
    assert_eq!((a.status, a.location()), (303, "/console"));
    let cookie = a.headers[SET_COOKIE].to_str().unwrap();
    for part in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/console",
        "Max-Age=28800",
    ] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let value = cookie.split(';').next().unwrap().split_once('=').unwrap().1;
    assert_eq!(value.len(), 64);
    // Only the token's hash is stored.
    let stored: Vec<u8> = sqlx::query_scalar("SELECT session_sha256 FROM wharf.console_sessions")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_ne!(stored, value.as_bytes());
    assert_eq!(stored.len(), 32);

    // Behind a TLS-terminating proxy the cookie is Secure.
    let a = sign_in(
        &base,
        "ada",
        OPERATOR_TOKEN,
        &[("x-forwarded-proto", "https")],
    )
    .await;
    assert!(a.headers[SET_COOKIE].to_str().unwrap().contains("; Secure"));
    assert_eq!(
        audit_rows(&db).await,
        vec![
            (
                "ada".into(),
                "operator".into(),
                "sign-in".into(),
                "console".into()
            ),
            (
                "ada".into(),
                "operator".into(),
                "sign-in".into(),
                "console".into()
            ),
        ]
    );
    // A configured lifetime bounds the cookie and the session.
    let db2 = TestDb::new().await;
    let base2 = start_with(
        &db2,
        ConsoleConfig {
            session_ms: 60_000,
            secure_cookie: true,
            ..ConsoleConfig::default()
        },
    )
    .await;
    let a = sign_in(&base2, "ada", READ_ONLY_TOKEN, &[]).await;
    let cookie = a.headers[SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.contains("Max-Age=60") && cookie.contains("; Secure"),
        "{cookie}"
    );
    let lifetime: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM expires_at - created_at)::float8 FROM wharf.console_sessions",
    )
    .fetch_one(&db2.pool)
    .await
    .unwrap();
    assert!((59.0..=61.0).contains(&lifetime), "{lifetime}");
}

#[tokio::test]
async fn every_page_shows_what_the_database_holds_and_never_a_secret_or_a_payload() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let (credential_token, key_seed) = seed_inbox(&db).await;
    let done = enqueue(&base, "welcome:ada", "email:ada", false, Some("acct-ada")).await;
    let proposal = enqueue(&base, "proposal:bob", "email:bob", true, None).await;
    let uncertain = enqueue(&base, "uncertain:cy", "email:cy", false, None).await;
    end_uncertain(&db, uncertain).await;
    let ops = Operator::sign_in(&base, "ada", OPERATOR_TOKEN).await;

    let pages: Vec<(String, Vec<String>)> = vec![
        (
            "".into(),
            vec![
                "Overview".into(),
                "ADMITTED".into(),
                "PROPOSED".into(),
                "UNCERTAIN".into(),
                "LEASE_LOST_AFTER_WRITE".into(),
                "accept-delayed".into(),
                "refuse-tampered".into(),
                "<svg".into(),
            ],
        ),
        (
            "/actions".into(),
            vec![
                "welcome:ada".into(),
                "proposal:bob".into(),
                "uncertain:cy".into(),
                "3 matched".into(),
            ],
        ),
        (
            "/actions?state=PROPOSED".into(),
            vec!["proposal:bob".into(), "1 matched".into()],
        ),
        (
            "/actions?lane=email:cy".into(),
            vec!["uncertain:cy".into(), "1 matched".into()],
        ),
        (
            "/actions?key=welcome:ada".into(),
            vec!["welcome:ada".into(), "1 matched".into()],
        ),
        ("/actions?tenant=nobody".into(), vec!["0 matched".into()]),
        (
            format!("/actions/{done}"),
            vec![
                "welcome:ada".into(),
                "acct-ada".into(),
                "kept until the action ends".into(),
                "unstarted actions ahead".into(),
            ],
        ),
        (
            format!("/actions/{proposal}"),
            vec!["id=\"admit\"".into(), "id=\"refuse\"".into()],
        ),
        (
            format!("/actions/{uncertain}"),
            vec![
                "gone (an ended action keeps no payload)".into(),
                "lease_lost".into(),
            ],
        ),
        (
            "/lanes".into(),
            vec![
                "email:ada".into(),
                "email:bob".into(),
                "waits for a decision".into(),
            ],
        ),
        (
            "/in-doubt".into(),
            vec![
                "uncertain:cy".into(),
                "lost its lease after its provider call started".into(),
            ],
        ),
        (
            "/dead-letters".into(),
            vec!["one explicit tenant and project".into()],
        ),
        (
            "/dead-letters?tenant=acme&project=p1".into(),
            vec!["nothing here".into()],
        ),
        ("/inbox".into(), vec!["acme".into(), "signature".into()]),
        (
            "/inbox/acme".into(),
            vec!["p1".into(), "laptop".into(), "d1".into(), "live".into()],
        ),
        (
            "/inbox/acme/p1".into(),
            vec![
                "device <code>d1</code>".into(),
                "3–4".into(),
                "k1".into(),
                "active".into(),
                "in-order".into(),
                "Skip to…".into(),
                "Floor to…".into(),
            ],
        ),
        ("/audit".into(), vec!["sign-in".into(), "ada".into()]),
    ];
    let secrets = [
        OPERATOR_TOKEN,
        READ_ONLY_TOKEN,
        PAYLOAD_MARK,
        credential_token.as_str(),
        key_seed.as_str(),
        ops.cookie.split_once('=').unwrap().1,
    ];
    for (path, wanted) in &pages {
        let page = ops.get(path).await;
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        assert!(
            page.headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        assert!(
            page.headers["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("default-src 'none'"),
            "{path}"
        );
        assert_eq!(page.headers["cache-control"], "no-store", "{path}");
        for want in wanted {
            assert!(
                page.body.contains(want.as_str()),
                "{path} lacks {want:?}:\n{}",
                page.body
            );
        }
        for secret in secrets {
            assert!(
                !page.body.contains(secret),
                "{path} shows a secret or payload"
            );
        }
        // Nothing is fetched from anywhere but the console itself.
        assert!(
            !page.body.contains("http://") && !page.body.contains("https://"),
            "{path}"
        );
    }
    for asset in ["/assets/console.css", "/assets/console.js"] {
        let a = ops.get(asset).await;
        assert_eq!(a.status, 200, "{asset}");
        assert!(
            !a.body.contains("http://") && !a.body.contains("https://"),
            "{asset}"
        );
    }
}

#[tokio::test]
async fn a_form_without_the_sessions_csrf_token_changes_nothing() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let proposal = enqueue(&base, "p", "lane", true, None).await;
    let ops = Operator::sign_in(&base, "ada", OPERATOR_TOKEN).await;
    let other = Operator::sign_in(&base, "eve", OPERATOR_TOKEN).await;
    let id = proposal.to_string();
    let foreign = other.csrf().await;
    for csrf in [
        None,
        Some(""),
        Some("0".repeat(64).as_str()),
        Some(foreign.as_str()),
    ] {
        let mut form = vec![("op", "admit"), ("id", id.as_str())];
        if let Some(csrf) = csrf {
            form.push(("csrf", csrf));
        }
        let a = ops.post("/do", &form).await;
        assert_eq!(a.status, 403, "{csrf:?}");
        assert!(a.body.contains("CSRF"), "{}", a.body);
    }
    // Sign-out needs it too.
    let a = ops.post("/sign-out", &[("csrf", &foreign)]).await;
    assert_eq!(a.status, 403);
    assert_eq!(
        action_state(&db, proposal).await.as_deref(),
        Some("PROPOSED")
    );
    let actions: Vec<String> = audit_rows(&db).await.into_iter().map(|r| r.2).collect();
    assert_eq!(actions, ["sign-in", "sign-in"], "refusals record nothing");
    // Without a session there is no form to forge: back to sign-in.
    let a = client()
        .post(format!("{base}/console/do"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("op=admit&id={id}&csrf={foreign}"))
        .send()
        .await
        .unwrap();
    assert_eq!(a.status(), 303);
    assert_eq!(
        action_state(&db, proposal).await.as_deref(),
        Some("PROPOSED")
    );
}

#[tokio::test]
async fn the_read_only_role_sees_everything_and_changes_nothing() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    seed_inbox(&db).await;
    let proposal = enqueue(&base, "p", "lane", true, Some("acct-1")).await;
    let viewer = Operator::sign_in(&base, "rita", READ_ONLY_TOKEN).await;
    for path in [
        "",
        "/actions",
        &format!("/actions/{proposal}"),
        "/lanes",
        "/in-doubt",
        "/inbox",
        "/inbox/acme",
        "/inbox/acme/p1",
        "/audit",
    ] {
        let page = viewer.get(path).await;
        assert_eq!(page.status, 200, "{path}");
        assert!(page.body.contains("rita · read-only"), "{path}");
    }
    let csrf = viewer.csrf().await;
    let id = proposal.to_string();
    let tries: Vec<Vec<(&str, &str)>> = vec![
        vec![("op", "admit"), ("id", &id)],
        vec![("op", "refuse"), ("id", &id)],
        vec![("op", "erase"), ("account", "acct-1")],
        vec![
            ("op", "skip"),
            ("tenant", "acme"),
            ("project", "p1"),
            ("producer_kind", "device"),
            ("producer_id", "d1"),
            ("to", "4"),
            ("reason", "lost"),
        ],
        vec![
            ("op", "floor"),
            ("tenant", "acme"),
            ("project", "p1"),
            ("producer_kind", "device"),
            ("producer_id", "d1"),
            ("floor", "2"),
            ("reason", "old"),
        ],
    ];
    for form in tries {
        let query = serde_urlencoded::to_string(&form).unwrap();
        let confirm = viewer.get(&format!("/confirm?{query}")).await;
        assert_eq!(confirm.status, 403, "{query}");
        assert!(confirm.body.contains("read-only role"));
        let mut form = form.clone();
        form.push(("csrf", &csrf));
        let a = viewer.post("/do", &form).await;
        assert_eq!(a.status, 403, "{query}");
        assert!(a.body.contains("read-only role"));
    }
    assert_eq!(
        action_state(&db, proposal).await.as_deref(),
        Some("PROPOSED")
    );
    assert_eq!(stream_state(&db).await, ("2".into(), "1".into()));
    // The read-only role may sign out (that changes only its own session).
    let a = viewer.post("/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!((a.status, a.location()), (303, "/console/sign-in"));
    let actions: Vec<String> = audit_rows(&db).await.into_iter().map(|r| r.2).collect();
    assert_eq!(actions, ["sign-in", "sign-out"]);
}

#[tokio::test]
async fn an_expired_or_ended_session_goes_back_to_sign_in() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let ops = Operator::sign_in(&base, "ada", OPERATOR_TOKEN).await;
    assert_eq!(ops.get("/actions").await.status, 200);
    // Move the session's end into the past (the database clock decides).
    sqlx::query(
        "UPDATE wharf.console_sessions SET created_at = now() - interval '2 hours',
                expires_at = now() - interval '1 second'",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let a = ops.get("/actions").await;
    assert_eq!((a.status, a.location()), (303, "/console/sign-in"));
    // The next sign-in deletes the expired session.
    let again = Operator::sign_in(&base, "ada", OPERATOR_TOKEN).await;
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.console_sessions")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(sessions, 1);
    // Signing out ends the session on the server, not only in the browser.
    let csrf = again.csrf().await;
    let a = again.post("/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(a.status, 303);
    assert!(
        a.headers[SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    assert_eq!(again.get("").await.status, 303);
    // A malformed cookie is no session either.
    let a = client()
        .get(format!("{base}/console"))
        .header(COOKIE, "wharf_console=%00abc")
        .send()
        .await
        .unwrap();
    assert_eq!(a.status(), 303);
}

#[tokio::test]
async fn operator_actions_follow_the_admin_api_rules_and_are_audited() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    seed_inbox(&db).await;
    let proposal = enqueue(&base, "p1", "lane-a", true, None).await;
    let other = enqueue(&base, "p2", "lane-b", true, None).await;
    enqueue(&base, "s1", "lane-c", false, Some("acct-9")).await;
    enqueue(&base, "s2", "lane-d", true, Some("acct-9")).await;
    let ops = Operator::sign_in(&base, "ada", OPERATOR_TOKEN).await;

    // The confirmation says what will happen before anything does.
    let confirm = ops.get(&format!("/confirm?op=admit&id={proposal}")).await;
    assert!(
        confirm.body.contains("becomes ADMITTED"),
        "{}",
        confirm.body
    );
    assert_eq!(
        action_state(&db, proposal).await.as_deref(),
        Some("PROPOSED")
    );

    let a = ops.act(&format!("op=admit&id={proposal}")).await;
    assert_eq!(
        (a.status, a.location()),
        (
            303,
            format!("/console/actions/{proposal}?notice=admitted").as_str()
        )
    );
    assert_eq!(
        action_state(&db, proposal).await.as_deref(),
        Some("ADMITTED")
    );
    let page = ops.get(a.location().trim_start_matches("/console")).await;
    assert!(page.body.contains("The proposal was admitted."));

    // Admitting twice is the admin API's 409, and records nothing.
    let a = ops.act(&format!("op=admit&id={proposal}")).await;
    assert_eq!(a.status, 409);
    assert!(a.body.contains("not-proposed"), "{}", a.body);
    let a = ops.act("op=refuse&id=999999").await;
    assert_eq!(a.status, 404);

    let a = ops.act(&format!("op=refuse&id={other}")).await;
    assert_eq!(a.status, 303);
    assert_eq!(action_state(&db, other).await.as_deref(), Some("CANCELLED"));

    let a = ops.act("op=erase&account=acct-9").await;
    assert_eq!(
        (a.status, a.location()),
        (303, "/console/actions?notice=erased&deleted=2")
    );
    let left: i64 =
        sqlx::query_scalar("SELECT count(*) FROM wharf.action WHERE subject_account_id = 'acct-9'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(left, 0);

    let stream = "tenant=acme&project=p1&producer_kind=device&producer_id=d1";
    // A skip that does not move the cursor forward is the library's conflict.
    let a = ops.act(&format!("op=skip&{stream}&to=2&reason=lost")).await;
    assert_eq!(a.status, 409);
    // Skipping the gap 3–4 walks the cursor through the retained 5 and 6.
    let a = ops
        .act(&format!("op=skip&{stream}&to=4&reason=device+lost+them"))
        .await;
    assert_eq!(
        (a.status, a.location()),
        (303, "/console/inbox/acme/p1?notice=skipped")
    );
    assert_eq!(stream_state(&db).await, ("6".into(), "1".into()));
    let a = ops
        .act(&format!("op=floor&{stream}&floor=9&reason=too+far"))
        .await;
    assert_eq!(a.status, 409, "the floor never passes the cursor + 1");
    let a = ops
        .act(&format!("op=floor&{stream}&floor=5&reason=old"))
        .await;
    assert_eq!(a.status, 303);
    assert_eq!(stream_state(&db).await, ("6".into(), "5".into()));
    // The inbox's own audit names the operator too.
    let inbox_audit: Vec<(String, String)> = sqlx::query_as(
        "SELECT action, actor_account FROM wharf.inbox_audit WHERE action <> 'ingest' ORDER BY audit_id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        inbox_audit,
        vec![
            ("stream-skip".into(), "ada".into()),
            ("stream-advance-floor".into(), "ada".into())
        ]
    );

    let audit = audit_rows(&db).await;
    let got: Vec<(&str, &str)> = audit.iter().map(|r| (r.2.as_str(), r.3.as_str())).collect();
    let (p, o) = (format!("action {proposal}"), format!("action {other}"));
    assert_eq!(
        got,
        vec![
            ("sign-in", "console"),
            ("action-admit", p.as_str()),
            ("action-refuse", o.as_str()),
            ("subject-erase", "subject acct-9"),
            ("stream-skip", "acme/p1/device:d1"),
            ("stream-advance-floor", "acme/p1/device:d1"),
        ]
    );
    assert!(audit.iter().all(|r| r.0 == "ada" && r.1 == "operator"));
    let page = ops.get("/audit").await;
    assert!(
        page.body.contains("cursor 2 -&gt; 6: device lost them"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn bad_parameters_are_refused_with_a_page_and_pages_are_bounded() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let ops = Operator::sign_in(&base, "ada", OPERATOR_TOKEN).await;
    for (path, status) in [
        ("/actions?state=BOGUS", 400),
        ("/actions?below=x", 400),
        ("/actions?lane=a%00b", 400),
        ("/actions/x", 400),
        ("/actions/123", 404),
        ("/in-doubt?before=yesterday", 400),
        ("/dead-letters?tenant=acme&project=p1&after=nope", 400),
        ("/inbox/not%20an%20identity", 400),
        ("/inbox/acme/p1?audit_before=1", 400),
        ("/audit?before=x", 400),
        ("/confirm?op=launch", 400),
        ("/confirm?op=skip&tenant=acme", 400),
    ] {
        let a = ops.get(path).await;
        assert_eq!(a.status, status, "{path}: {}", a.body);
        assert!(
            a.headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html"),
            "{path}"
        );
        assert!(a.body.contains("correlation id"), "{path}");
    }
    let csrf = ops.csrf().await;
    let a = ops
        .post("/do", &[("csrf", &csrf), ("op", "admit"), ("id", "x")])
        .await;
    assert_eq!(a.status, 400);

    // 120 actions: pages of 50, newest first, each starting below the last.
    for i in 0..120 {
        enqueue(&base, &format!("k{i:03}"), "lane", false, None).await;
    }
    let first = ops.get("/actions").await;
    assert_eq!(
        first
            .body
            .matches("<td><a href=\"/console/actions/")
            .count(),
        50
    );
    assert!(first.body.contains("k119") && !first.body.contains("k069"));
    let next = first
        .body
        .split("<p class=\"pager\"><a href=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    assert_eq!(next, "/console/actions?below=71");
    let second = ops.get("/actions?below=71").await;
    assert!(
        second.body.contains("k069")
            && !second.body.contains("k070")
            && second.body.contains("k020")
    );
    let third = ops.get("/actions?below=21").await;
    assert_eq!(
        third
            .body
            .matches("<td><a href=\"/console/actions/")
            .count(),
        20
    );
    assert!(
        !third.body.contains("class=\"pager\""),
        "the last page has no next"
    );
}

#[tokio::test]
async fn the_console_path_is_configurable() {
    let db = TestDb::new().await;
    let base = start_with(
        &db,
        ConsoleConfig {
            path: "/ops/console".into(),
            ..ConsoleConfig::default()
        },
    )
    .await;
    let a = client()
        .get(format!("{base}/ops/console/sign-in"))
        .send()
        .await
        .unwrap();
    assert_eq!(a.status(), 200);
    let body = a.text().await.unwrap();
    assert!(body.contains("action=\"/ops/console/sign-in\""));
    assert!(body.contains("href=\"/ops/console/assets/console.css\""));
    let a = client()
        .get(format!("{base}/console/sign-in"))
        .send()
        .await
        .unwrap();
    assert_eq!(a.status(), 404);
    assert!(
        wharf_http::console::routes(
            db.pool.clone(),
            std::sync::Arc::new(wharf::outbox::Registry::new()),
            OperatorToken::default(),
            OperatorToken::default(),
            ConsoleConfig {
                path: "/console/".into(),
                ..ConsoleConfig::default()
            },
        )
        .is_err()
    );
}

#[tokio::test]
async fn sign_in_attempts_from_one_address_are_limited() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    for i in 0..wharf_http::console::SIGN_IN_BURST {
        assert_eq!(
            sign_in(&base, "mallory", &format!("guess-{i}"), &[])
                .await
                .status,
            401
        );
    }
    // Even the right token waits now: the limit comes before the token is looked at.
    let a = sign_in(&base, "ada", OPERATOR_TOKEN, &[]).await;
    assert_eq!(a.status, 429);
    assert!(a.headers.contains_key("retry-after"));
    assert!(a.headers.get(SET_COOKIE).is_none());
}

/// The operations issue's actions in the console: cancel, pause and resume a kind (or one
/// tenant of it), redrive dead letters (the confirmation is the dry run). Each is the library's
/// rule, written to the operator audit and the console's own.
#[tokio::test]
async fn cancel_pause_resume_and_redrive_from_the_console() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let admitted = enqueue(&base, "c1", "lane-c", false, None).await;
    let ops = Operator::sign_in(&base, "ada", OPERATOR_TOKEN).await;

    // The detail page offers the cancel; the confirmation says what it does.
    let page = ops.get(&format!("/actions/{admitted}")).await;
    assert!(page.body.contains("id=\"cancel\""), "{}", page.body);
    let confirm = ops.get(&format!("/confirm?op=cancel&id={admitted}")).await;
    assert!(
        confirm.body.contains("stop reason OPERATOR"),
        "{}",
        confirm.body
    );
    let a = ops.act(&format!("op=cancel&id={admitted}")).await;
    assert_eq!(
        (a.status, a.location()),
        (
            303,
            format!("/console/actions/{admitted}?notice=cancelled").as_str()
        )
    );
    assert_eq!(
        action_state(&db, admitted).await.as_deref(),
        Some("CANCELLED")
    );
    // Cancelling what ended is the library's refusal: 409, nothing recorded.
    let a = ops.act(&format!("op=cancel&id={admitted}")).await;
    assert_eq!(a.status, 409);
    assert!(a.body.contains("not-cancellable"), "{}", a.body);

    // Pause one tenant of the kind from the overview's form, then the whole kind.
    let overview = ops.get("").await;
    assert!(
        overview.body.contains("Nothing is paused"),
        "{}",
        overview.body
    );
    assert!(
        overview.body.contains("<option value=\"noop\">"),
        "{}",
        overview.body
    );
    let a = ops
        .act("op=pause&kind=noop&tenant=acme&note=their+relay+is+down")
        .await;
    assert_eq!((a.status, a.location()), (303, "/console?notice=paused"));
    let a = ops.act("op=pause&kind=noop&tenant=&note=").await;
    assert_eq!(a.status, 303);
    let a = ops.act("op=pause&kind=nope&tenant=").await;
    assert_eq!(a.status, 400, "{}", a.body);
    let pauses: Vec<(String, Option<String>, String)> = sqlx::query_as(
        "SELECT kind, tenant_id, actor FROM wharf.kind_pause ORDER BY tenant_id NULLS FIRST",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        pauses,
        vec![
            ("noop".into(), None, "ada".into()),
            ("noop".into(), Some("acme".into()), "ada".into())
        ]
    );
    let overview = ops.get("?notice=paused").await;
    assert!(
        overview.body.contains("their relay is down"),
        "{}",
        overview.body
    );
    assert!(overview.body.contains("Resume…"), "{}", overview.body);
    let a = ops.act("op=resume&kind=noop&tenant=").await;
    assert_eq!((a.status, a.location()), (303, "/console?notice=resumed"));
    let left: Vec<Option<String>> = sqlx::query_scalar("SELECT tenant_id FROM wharf.kind_pause")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(left, [Some("acme".to_owned())], "the tenant's pause stays");

    // Redrive: the confirmation is the dry run; with nothing dead it says so and sends nothing.
    let dead = ops.get("/dead-letters?tenant=acme&project=p1").await;
    assert!(dead.body.contains("id=\"redrive\""), "{}", dead.body);
    let confirm = ops.get("/confirm?op=redrive&tenant=acme&project=p1").await;
    assert!(
        confirm.body.contains("Nothing to redrive"),
        "{}",
        confirm.body
    );
    let a = ops.act("op=redrive&tenant=acme&project=p1").await;
    assert_eq!(
        (a.status, a.location()),
        (
            303,
            "/console/dead-letters?tenant=acme&project=p1&notice=redriven&redriven=0"
        )
    );

    let operator_audit: Vec<(String, Option<i64>, String)> = sqlx::query_as(
        // The library's rows of the one trail: those without a console role.
        "SELECT operation, action_id, actor FROM wharf.operator_audit WHERE role IS NULL ORDER BY audit_id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        operator_audit,
        vec![
            ("cancel".into(), Some(admitted), "ada".into()),
            ("pause".into(), None, "ada".into()),
            ("pause".into(), None, "ada".into()),
            ("resume".into(), None, "ada".into()),
        ]
    );
    let console: Vec<String> = audit_rows(&db).await.into_iter().map(|r| r.2).collect();
    assert_eq!(
        console,
        [
            "sign-in",
            "action-cancel",
            "kind-pause",
            "kind-pause",
            "kind-resume",
            "dead-letters-redrive"
        ]
    );
}
