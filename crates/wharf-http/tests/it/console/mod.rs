//! The operator console over real HTTP and a real database: every page, every form, sign-in,
//! CSRF and read-only refusals, session expiry, and what no page may ever show. `browser.rs`
//! drives the same console in a real headless Chromium.

mod audit;
mod browser;
mod lanes;
mod measure;
mod overview;
mod pages;

use std::sync::Arc;

use reqwest::header::{COOKIE, HeaderMap, LOCATION, SET_COOKIE};
use serde_json::json;
use wharf::outbox::Registry;
use wharf_http::auth::OperatorToken;
use wharf_http::console::ConsoleConfig;
use wharf_testkit::TestDb;

use crate::support::{Noop, serve};

pub const OPERATOR_TOKEN: &str = "operator-secret-7f3a";
pub const READ_ONLY_TOKEN: &str = "read-only-secret-91c2";
/// Text inside every seeded payload: no page may ever show it.
pub const PAYLOAD_MARK: &str = "payload-mark-5be1";

/// The admin API and the console on one server, as `wharf serve` composes them.
pub async fn start_with(db: &TestDb, config: ConsoleConfig) -> String {
    let mut registry = Registry::new();
    registry.register(Arc::new(Noop)).unwrap();
    let operator = OperatorToken::new(Some(OPERATOR_TOKEN.into()));
    let registry = Arc::new(registry);
    let app = wharf_http::app([
        wharf_http::actions::routes(db.pool.clone(), registry.clone(), operator.clone()),
        wharf_http::console::routes(
            db.pool.clone(),
            registry,
            operator,
            OperatorToken::new(Some(READ_ONLY_TOKEN.into())),
            config,
        )
        .unwrap(),
    ]);
    serve(app).await
}

pub async fn start(db: &TestDb) -> String {
    start_with(db, ConsoleConfig::default()).await
}

/// An HTTP client that follows no redirect (the tests look at each 303).
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// An answer: status, headers, body.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn location(&self) -> &str {
        self.headers
            .get(LOCATION)
            .map(|v| v.to_str().unwrap())
            .unwrap_or("")
    }
}

async fn answer(response: reqwest::Response) -> Answer {
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: response.text().await.unwrap(),
    }
}

/// A browser without a browser: a session cookie and the CSRF token of its pages.
pub struct Operator {
    pub base: String,
    pub cookie: String,
    client: reqwest::Client,
}

impl Operator {
    /// Signs in with `token` as `name`; panics unless the answer is the 303 with a cookie.
    pub async fn sign_in(base: &str, name: &str, token: &str) -> Operator {
        let a = sign_in(base, name, token, &[]).await;
        assert_eq!(a.status, 303, "{}", a.body);
        let set = a.headers[SET_COOKIE].to_str().unwrap();
        let cookie = set.split(';').next().unwrap().to_owned();
        Operator {
            base: base.to_owned(),
            cookie,
            client: client(),
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        answer(
            self.client
                .get(format!("{}/console{path}", self.base))
                .header(COOKIE, &self.cookie)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Answer {
        answer(
            self.client
                .post(format!("{}/console{path}", self.base))
                .header(COOKIE, &self.cookie)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(serde_urlencoded::to_string(form).unwrap())
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// The CSRF token the console's pages carry for this session.
    pub async fn csrf(&self) -> String {
        let page = self.get("").await;
        csrf_of(&page.body).expect("a page with the sign-out form")
    }

    /// Runs an operator action the way the browser does: the confirmation page's form, posted.
    pub async fn act(&self, query: &str) -> Answer {
        let confirm = self.get(&format!("/confirm?{query}")).await;
        assert_eq!(confirm.status, 200, "{}", confirm.body);
        let fields = hidden_fields(&confirm.body);
        let form: Vec<(&str, &str)> = fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.post("/do", &form).await
    }
}

pub async fn sign_in(base: &str, name: &str, token: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = client()
        .post(format!("{base}/console/sign-in"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string([("operator", name), ("token", token)]).unwrap());
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    answer(request.send().await.unwrap()).await
}

/// The `csrf` hidden field of a page.
pub fn csrf_of(html: &str) -> Option<String> {
    hidden_fields(html)
        .into_iter()
        .find(|(k, _)| k == "csrf")
        .map(|(_, v)| v)
}

/// Every `<input type="hidden" name=… value=…>` of a page, unescaped.
pub fn hidden_fields(html: &str) -> Vec<(String, String)> {
    html.split("<input type=\"hidden\" name=\"")
        .skip(1)
        .filter_map(|rest| {
            let (name, rest) = rest.split_once('"')?;
            let value = rest.split_once("value=\"")?.1.split_once('"')?.0;
            let value = value
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&");
            Some((name.to_owned(), value))
        })
        .collect()
}

/// Enqueues a `noop` action through the admin API; returns its id.
pub async fn enqueue(
    base: &str,
    key: &str,
    lane: &str,
    proposed: bool,
    subject: Option<&str>,
) -> i64 {
    let response = client()
        .post(format!("{base}/v1/actions"))
        .bearer_auth(OPERATOR_TOKEN)
        .json(
            &json!({"kind": "noop", "tenant_id": "acme", "project_id": "p1",
                      "lane_key": lane, "idempotency_key": key, "proposed": proposed,
                      "subject_account_id": subject,
                      "payload": {"text": PAYLOAD_MARK}}),
        )
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let body: serde_json::Value = response.json().await.unwrap();
    body["id"].as_i64().unwrap()
}

/// Ends an admitted action UNCERTAIN the way the executor would (claim, then end: a move from
/// wharf.action_live to wharf.action_ended).
pub async fn end_uncertain(db: &TestDb, id: i64) {
    sqlx::query(
        "UPDATE wharf.action_live SET state = 'EXECUTING', epoch = epoch + 1, attempt = attempt + 1,
                lease_expires_at = now() + interval '1 minute', write_started_at = now()
          WHERE id = $1",
    )
    .bind(id)
    .execute(&db.pool)
    .await
    .unwrap();
    crate::support::end_by_hand(
        &db.pool,
        id,
        "UNCERTAIN",
        "LEASE_LOST_AFTER_WRITE",
        Some("lease_lost"),
    )
    .await;
}

/// A tenant, a key, a credential, and a stream whose cursor is 2 with sequences 5 and 6
/// retained beyond it (gap 3–4), with their audit rows, as ingest would have left them.
/// Returns the credential's token and the key's private seed.
pub async fn seed_inbox(db: &TestDb) -> (String, String) {
    let pool = &db.pool;
    wharf::inbox::create_tenant(pool, "acme").await.unwrap();
    let key = wharf::inbox::generate_key(
        pool,
        "acme",
        "p1",
        Some("k1"),
        std::time::Duration::from_secs(3600),
    )
    .await
    .unwrap();
    let issued = wharf::inbox::issue_credential(pool, "acme", "laptop", Some("d1"))
        .await
        .unwrap();
    let stream: i64 = sqlx::query_scalar(
        "INSERT INTO wharf.inbox_streams (tenant_id, project_id, producer_kind, producer_id,
                                          acknowledged_sequence)
         VALUES ('acme', 'p1', 'device', 'd1', 2) RETURNING stream_id",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    for seq in [1i64, 2, 5, 6] {
        sqlx::query(
            "INSERT INTO wharf.inbox_identities (stream_id, event_id, idempotency_key,
                 producer_sequence, content_sha256, event_type, key_id, outcome, correlation_id)
             VALUES ($1, lpad($2::text, 26, '0'), 'idem-' || $2, $2, sha256($2::text::bytea),
                     'sync_cursor', 'k1', 'accept-delayed', 'c-' || $2)",
        )
        .bind(stream)
        .bind(seq)
        .execute(pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO wharf.inbox_audit (action, tenant_id, project_id, actor_account,
                 actor_device, producer_kind, producer_id, event_id_sha256, producer_sequence,
                 outcome, reason, correlation_id)
             VALUES ('ingest', 'acme', 'p1', 'laptop', 'd1', 'device', 'd1',
                     encode(sha256($1::text::bytea), 'hex'), $1, 'accept-delayed', 'in-order',
                     'c-' || $1)",
        )
        .bind(seq)
        .execute(pool)
        .await
        .unwrap();
    }
    sqlx::query(
        "INSERT INTO wharf.inbox_audit (action, tenant_id, project_id, actor_account, outcome,
             reason, correlation_id)
         VALUES ('ingest', 'acme', 'p1', 'laptop', 'refuse-tampered', 'signature', 'c-bad')",
    )
    .execute(pool)
    .await
    .unwrap();
    (issued.token, key.private_seed_base64())
}
