//! The lanes page's keyset pages and filters.

use serde_json::json;
use wharf_testkit::TestDb;

use super::*;

/// The path of a page's "Next" link, relative to `/console`, if it has one.
fn next_link(body: &str) -> Option<String> {
    let at = body.find("<p class=\"pager\"><a href=\"")?;
    let rest = &body[at + "<p class=\"pager\"><a href=\"".len()..];
    let href = rest[..rest.find('"')?].replace("&amp;", "&");
    Some(href.strip_prefix("/console").unwrap().to_owned())
}

/// The lane keys of a lanes page, in the order shown.
fn lanes_of(body: &str) -> Vec<String> {
    body.split("/console/actions?lane=")
        .skip(1)
        .map(|s| s[s.find('>').unwrap() + 1..s.find("</a>").unwrap()].to_owned())
        .collect()
}

#[tokio::test]
async fn lanes_come_in_keyset_pages_busiest_first_and_filter_by_tenant_and_kind() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    for i in 0..3 {
        enqueue(&base, &format!("busy-{i}"), "busy", false, None).await;
    }
    for i in 0..2 {
        enqueue(&base, &format!("mid-{i}"), "mid", false, None).await;
    }
    for i in 0..50 {
        enqueue(
            &base,
            &format!("one-{i}"),
            &format!("l-{i:02}"),
            false,
            None,
        )
        .await;
    }
    let response = client()
        .post(format!("{base}/v1/actions"))
        .bearer_auth(OPERATOR_TOKEN)
        .json(
            &json!({"kind": "noop", "tenant_id": "globex", "project_id": "p1",
                      "lane_key": "g-lane", "idempotency_key": "g-1",
                      "payload": {"text": PAYLOAD_MARK}}),
        )
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());

    let ops = Operator::sign_in(&base, "ada", READ_ONLY_TOKEN).await;
    let first = ops.get("/lanes").await;
    assert_eq!(first.status, 200, "{}", first.body);
    let mut expected: Vec<String> = vec!["busy".into(), "mid".into(), "g-lane".into()];
    expected.extend((0..47).map(|i| format!("l-{i:02}")));
    assert_eq!(lanes_of(&first.body), expected);
    let next = next_link(&first.body).expect("a full page links to the next");
    assert_eq!(next, "/lanes?after=1%2Cl-46");

    let second = ops.get(&next).await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(lanes_of(&second.body), ["l-47", "l-48", "l-49"]);
    assert_eq!(next_link(&second.body), None, "the last page links nowhere");

    // Filters keep only the lanes with an unstarted action of the tenant or kind, and the pager
    // carries them along.
    let globex = ops.get("/lanes?tenant=globex").await;
    assert_eq!(lanes_of(&globex.body), ["g-lane"]);
    assert!(globex.body.contains("value=\"globex\""), "{}", globex.body);
    let other_kind = ops.get("/lanes?kind=email").await;
    assert_eq!(lanes_of(&other_kind.body), Vec::<String>::new());
    let noop = ops.get("/lanes?kind=noop&after=2,mid").await;
    assert_eq!(lanes_of(&noop.body)[..2], ["g-lane", "l-00"]);
    let one = ops.get("/lanes?lane=mid").await;
    assert_eq!(lanes_of(&one.body), ["mid"]);

    for bad in ["/lanes?after=x", "/lanes?after=3", "/lanes?after=3,"] {
        assert_eq!(ops.get(bad).await.status, 400, "{bad}");
    }
}
