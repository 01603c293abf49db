//! HTTP adapter tests against a real, scripted HTTP server on loopback (`http/server.rs`).
//!
//! The sender tests here drive the network sender directly and check the verdict of each
//! scripted case and the copies the server received; `http/webhook.rs` runs the `webhook` kind
//! through the real executor and the conformance suite.

mod envelope;
mod envelope_limit;
mod receiver;
mod server;
mod webhook;

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use server::{ScriptedServer, Step};
use wharf_adapters::http::{HttpSenderConfig, NetworkSender, Verdict};

/// Short timeouts keep the timeout cases quick; connect stays well below total so a connect
/// failure is never mistaken for an ambiguous timeout.
fn config() -> HttpSenderConfig {
    HttpSenderConfig {
        connect_timeout_ms: 500,
        total_timeout_ms: 1_500,
        allow_cidrs: vec!["127.0.0.0/8".into()],
        ..HttpSenderConfig::default()
    }
}

fn sender() -> NetworkSender {
    NetworkSender::new(&config()).unwrap()
}

async fn post(sender: &NetworkSender, url: &str, dedupe: bool) -> Verdict {
    let url = reqwest::Url::parse(url).unwrap();
    let destination = match sender.check_destination(&url).await {
        Ok(d) => d,
        Err(verdict) => return verdict,
    };
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    sender
        .post(&destination, headers, b"{\"n\":1}".to_vec(), None, dedupe)
        .await
        .verdict
}

fn done(r: &str) -> Verdict {
    Verdict::Done {
        readback_ref: r.into(),
    }
}

fn retry(code: &str, after_s: Option<u64>) -> Verdict {
    Verdict::Retry {
        after: after_s.map(Duration::from_secs),
        code: code.into(),
    }
}

fn failed(code: &str) -> Verdict {
    Verdict::Failed { code: code.into() }
}

fn uncertain(code: &str) -> Verdict {
    Verdict::Uncertain { code: code.into() }
}

#[tokio::test]
async fn sender_classifies_every_scripted_case() {
    let hang = Step::Hang(Duration::from_secs(5));
    let slow = Step::SlowBody {
        status: 200,
        chunks: 40,
        interval: Duration::from_millis(100),
    };
    let cases: Vec<(&str, Step, bool, Verdict)> = vec![
        ("200", Step::status(200), false, done("200")),
        (
            "201 with a request id",
            Step::with_header(201, "x-request-id", "req-42"),
            false,
            done("201 x-request-id=req-42"),
        ),
        ("400", Step::status(400), false, failed("http_4xx_400")),
        ("404", Step::status(404), false, failed("http_4xx_404")),
        ("409", Step::status(409), false, failed("http_4xx_409")),
        ("410", Step::status(410), false, failed("http_4xx_410")),
        (
            "429 with Retry-After",
            Step::with_header(429, "retry-after", "7"),
            false,
            retry("http_429", Some(7)),
        ),
        ("500", Step::status(500), false, retry("http_500", None)),
        (
            "503 with Retry-After",
            Step::with_header(503, "retry-after", "120"),
            false,
            retry("http_503", Some(120)),
        ),
        (
            "redirect",
            Step::with_header(302, "location", "http://127.0.0.1:9/elsewhere"),
            false,
            failed("redirect"),
        ),
        (
            "reset before response",
            Step::Reset,
            false,
            uncertain("connection_lost_after_send"),
        ),
        (
            "reset before response, dedupe",
            Step::Reset,
            true,
            retry("connection_lost_after_send", None),
        ),
        (
            "timeout after send",
            hang.clone(),
            false,
            uncertain("timeout_after_send"),
        ),
        (
            "timeout after send, dedupe",
            hang,
            true,
            retry("timeout_after_send", None),
        ),
        ("slow body after 200", slow, false, done("200")),
    ];
    let sender = sender();
    for (name, step, dedupe, expected) in cases {
        let server = ScriptedServer::start(vec![step], None).await;
        let started = std::time::Instant::now();
        let verdict = post(&sender, &server.url("/hook"), dedupe).await;
        assert_eq!(verdict, expected, "{name}");
        assert!(
            started.elapsed() < Duration::from_millis(2_500),
            "{name}: the total timeout bounds every case"
        );
        let received = server.received();
        assert_eq!(received.len(), 1, "{name}: exactly one copy");
        assert_eq!(received[0].method, "POST");
        assert_eq!(received[0].body, b"{\"n\":1}");
    }
}

#[tokio::test]
async fn connection_refused_is_a_provable_retry() {
    // Bind, learn the port, close: nothing listens there any more.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let verdict = post(&sender(), &format!("http://127.0.0.1:{port}/"), false).await;
    assert_eq!(verdict, retry("connect_failed", None));
}

#[tokio::test]
async fn unresolvable_name_is_a_provable_retry() {
    let verdict = post(&sender(), "http://nonexistent.invalid/hook", false).await;
    assert_eq!(verdict, retry("dns_failed", None));
}

#[tokio::test]
async fn private_destinations_are_refused_without_a_connection() {
    let server = ScriptedServer::start(vec![Step::status(200)], None).await;
    let port = server.addr().port();
    let strict = NetworkSender::new(&HttpSenderConfig {
        allow_cidrs: Vec::new(),
        ..config()
    })
    .unwrap();
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://0x7f.1:{port}/"),
        "http://169.254.169.254/latest/meta-data".to_owned(),
        "http://10.0.0.1/".to_owned(),
        "http://[::1]/".to_owned(),
        "http://[fd00::1]/".to_owned(),
        "http://100.64.0.1/".to_owned(),
    ] {
        assert_eq!(
            post(&strict, &url, false).await,
            failed("destination_forbidden"),
            "{url}"
        );
    }
    assert_eq!(server.connections(), 0, "the guard never connects");

    // The allow-list admits exactly its networks.
    let allowed = sender();
    assert_eq!(
        post(&allowed, &format!("http://localhost:{port}/"), false).await,
        done("200")
    );
    assert_eq!(
        post(&allowed, "http://10.0.0.1/", false).await,
        failed("destination_forbidden")
    );
    assert_eq!(server.connections(), 1);
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let target = ScriptedServer::start(vec![Step::status(200)], None).await;
    let redirecting = ScriptedServer::start(
        vec![Step::with_header(307, "location", &target.url("/moved"))],
        None,
    )
    .await;
    let verdict = post(&sender(), &redirecting.url("/hook"), false).await;
    assert_eq!(verdict, failed("redirect"));
    assert_eq!(target.connections(), 0);
}

#[tokio::test]
async fn a_call_timeout_shorter_than_the_total_wins() {
    let server = ScriptedServer::start(vec![Step::Hang(Duration::from_secs(5))], None).await;
    let sender = sender();
    let url = reqwest::Url::parse(&server.url("/")).unwrap();
    let destination = sender.check_destination(&url).await.unwrap();
    let started = std::time::Instant::now();
    let delivery = sender
        .post(
            &destination,
            HeaderMap::new(),
            Vec::new(),
            Some(Duration::from_millis(300)),
            false,
        )
        .await;
    assert_eq!(delivery.verdict, uncertain("timeout_after_send"));
    assert!(started.elapsed() < Duration::from_millis(1_000));
}

#[tokio::test]
async fn bodies_are_read_only_up_to_the_limit() {
    let server = ScriptedServer::start(
        vec![Step::Respond {
            status: 200,
            headers: Vec::new(),
            body: "y".repeat(10_000),
        }],
        None,
    )
    .await;
    let sender = NetworkSender::new(&HttpSenderConfig {
        response_bytes_max: 100,
        ..config()
    })
    .unwrap();
    let url = reqwest::Url::parse(&server.url("/")).unwrap();
    let destination = sender.check_destination(&url).await.unwrap();
    let delivery = sender
        .post(&destination, HeaderMap::new(), Vec::new(), None, false)
        .await;
    assert_eq!(delivery.status, Some(200));
    assert_eq!(delivery.body.len(), 100);
}

#[tokio::test]
async fn a_signed_request_verifies_at_the_receiver() {
    use wharf_adapters::http::{
        InMemoryWebhookSigner, SignScope, WebhookSigner, signature_header, signed_content,
    };
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let server = ScriptedServer::start(vec![Step::status(204)], Some(key.verifying_key())).await;
    let signer = InMemoryWebhookSigner::new(key);
    let body = b"{\"hello\":\"world\"}".to_vec();
    let timestamp = chrono::Utc::now().timestamp();
    let signatures = signer
        .sign(
            SignScope {
                tenant_id: Some("t1"),
                project_id: None,
            },
            &signed_content("msg_1", timestamp, &body),
        )
        .await
        .unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("webhook-id", HeaderValue::from_static("msg_1"));
    headers.insert("webhook-timestamp", timestamp.to_string().parse().unwrap());
    headers.insert(
        "webhook-signature",
        signature_header(&signatures).parse().unwrap(),
    );
    let sender = sender();
    let url = reqwest::Url::parse(&server.url("/hooks/in?x=1")).unwrap();
    let destination = sender.check_destination(&url).await.unwrap();
    let delivery = sender.post(&destination, headers, body, None, false).await;
    assert_eq!(delivery.verdict, done("204"));
    let received = server.received();
    assert_eq!(received[0].path, "/hooks/in?x=1");
    assert_eq!(received[0].header("webhook-id"), Some("msg_1"));
    assert_eq!(received[0].signature_ok, Some(true));
}
