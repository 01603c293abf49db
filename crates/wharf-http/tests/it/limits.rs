//! The body limit comes before reading (SPEC §3.4 step 0; issue 11, defect 4): a request that
//! announces more than its route's limit gets 413 while its client has sent nothing but
//! headers, and a chunked body is cut off at the limit instead of read to its end.

use std::sync::Arc;
use std::time::Duration;

use wharf::inbox::{Inbox, InboxConfig};
use wharf::outbox::Registry;
use wharf_http::auth::OperatorToken;
use wharf_testkit::TestDb;

use crate::support::{RawAnswer, raw, serve};

const SINGLE_MAX: usize = 4096;
const BATCH_MAX: usize = 8192;

/// Every route with a body, on one server; small inbox limits so a test body is cheap.
async fn start(db: &TestDb) -> String {
    let inbox = Arc::new(Inbox::new(
        db.pool.clone(),
        InboxConfig {
            body_bytes_max: SINGLE_MAX,
            batch_body_bytes_max: BATCH_MAX,
            ..InboxConfig::default()
        },
    ));
    serve(wharf_http::app([
        wharf_http::ingest::routes(inbox),
        wharf_http::actions::routes(
            db.pool.clone(),
            Arc::new(Registry::new()),
            OperatorToken::new(Some("op".into())),
        ),
    ]))
    .await
}

/// The longest a refusal of headers alone may take: the server answers at once; this only
/// leaves room for a loaded machine. A server that waited for the body would never answer.
const HEADERS_ONLY_ANSWER_MS_MAX: u64 = 2_000;

fn assert_refused_at_once(answer: &RawAnswer, what: &str) {
    assert_eq!(answer.status, 413, "{what}: {answer:?}");
    assert_eq!(
        answer.json["code"], "payload-too-large",
        "{what}: {answer:?}"
    );
    assert_eq!(answer.json["reason"], "body-too-large", "{what}");
    assert!(
        answer.json["correlation_id"]
            .as_str()
            .is_some_and(|c| !c.is_empty()),
        "{what}"
    );
    assert!(
        answer.waited < Duration::from_millis(HEADERS_ONLY_ANSWER_MS_MAX),
        "{what}: answered after {:?}",
        answer.waited
    );
}

#[tokio::test]
async fn an_announced_length_over_the_limit_is_refused_before_any_body_byte() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let single = "/v1/tenants/acme/projects/web/envelopes";
    let batch = "/v1/tenants/acme/projects/web/envelopes:batch";
    for (path, credential) in [
        (single, Some("wharf_nope")),
        (single, None),
        (batch, Some("wharf_nope")),
        (batch, None),
        ("/v1/actions", Some("op")),
        ("/v1/actions", None),
    ] {
        for length in [3u64 * 1024 * 1024, 100 * 1024 * 1024 * 1024] {
            let auth = credential
                .map(|c| format!("authorization: Bearer {c}\r\n"))
                .unwrap_or_default();
            let head = format!(
                "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{auth}content-length: {length}\r\n\r\n"
            );
            // Headers only: the client never sends the body it announced.
            let answer = raw(&base, &head, b"").await;
            assert_refused_at_once(&answer, &format!("{path} {credential:?} {length}"));
        }
    }
    // One byte over each limit is refused too, one byte at it is not a 413.
    let envelope_head = |length: usize| {
        format!(
            "POST {single} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer wharf_nope\r\ncontent-length: {length}\r\n\r\n"
        )
    };
    let over = raw(&base, &envelope_head(SINGLE_MAX + 1), b"").await;
    assert_refused_at_once(&over, "single, one byte over");
    let at = raw(&base, &envelope_head(SINGLE_MAX), &vec![b' '; SINGLE_MAX]).await;
    assert_eq!(at.status, 401, "at the limit the pipeline runs: {at:?}");
}

#[tokio::test]
async fn a_chunked_body_is_cut_off_at_the_limit() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    for (path, limit) in [
        ("/v1/tenants/acme/projects/web/envelopes", SINGLE_MAX),
        ("/v1/tenants/acme/projects/web/envelopes:batch", BATCH_MAX),
        ("/v1/actions", wharf_http::actions::ENQUEUE_BODY_BYTES_MAX),
    ] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer op\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        // One chunk past the limit and no terminating chunk: a server that read to the end
        // would wait for ever.
        let size = limit + 1024;
        let mut body = format!("{size:x}\r\n").into_bytes();
        body.extend(std::iter::repeat_n(b' ', size));
        body.extend_from_slice(b"\r\n");
        let answer = raw(&base, &head, &body).await;
        assert_refused_at_once(&answer, path);
    }
}
