//! One operator audit trail: what an operator does in the console and what the admin API does
//! are rows of the same table, read back by the console's audit page, by `GET /v1/audit` and by
//! `wharf::outbox::audit` (what `wharf audit` prints).

use serde_json::{Value, json};
use wharf_testkit::TestDb;

use super::*;

#[tokio::test]
async fn console_and_api_operator_actions_are_one_trail_read_by_every_reader() {
    let db = TestDb::new().await;
    let base = start(&db).await;
    let by_api = enqueue(&base, "t1", "lane-t1", false, None).await;
    let by_console = enqueue(&base, "t2", "lane-t2", false, None).await;

    // The admin API cancels one, naming its actor.
    let response = client()
        .post(format!("{base}/v1/actions/{by_api}/cancel"))
        .bearer_auth(OPERATOR_TOKEN)
        .header("x-correlation-id", "corr-api-1")
        .json(&json!({"actor": "api-bob"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // An operator cancels the other in the console.
    let ops = Operator::sign_in(&base, "ada", OPERATOR_TOKEN).await;
    let a = ops.act(&format!("op=cancel&id={by_console}")).await;
    assert_eq!(a.status, 303, "{}", a.body);

    // The console's audit page shows both, the API's row without a console role.
    let page = ops.get("/audit").await;
    assert_eq!(page.status, 200);
    for needle in [
        "api-bob",
        "API or CLI",
        &format!("action {by_api}"),
        "action-cancel",
        &format!("action {by_console}"),
        "sign-in",
    ] {
        assert!(page.body.contains(needle), "{needle}: {}", page.body);
    }

    // The API's audit (and the CLI's, which calls the same function) shows the console's rows.
    let answer: Value = client()
        .get(format!("{base}/v1/audit"))
        .bearer_auth(OPERATOR_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let got: Vec<(String, String, Value)> = answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["operation"].as_str().unwrap().to_owned(),
                i["actor"].as_str().unwrap().to_owned(),
                i.get("role").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("cancel".into(), "api-bob".into(), Value::Null),
            ("sign-in".into(), "ada".into(), json!("operator")),
            ("cancel".into(), "ada".into(), Value::Null),
            ("action-cancel".into(), "ada".into(), json!("operator")),
        ]
    );
    let filter = wharf::outbox::AuditFilter {
        action_id: Some(by_console),
        ..Default::default()
    };
    let entries = wharf::outbox::audit(&db.pool, &filter).await.unwrap();
    let ops_of: Vec<(&str, Option<&str>)> = entries
        .iter()
        .map(|e| (e.operation.as_str(), e.role.as_deref()))
        .collect();
    // The library's record of the change and the console's record of the request, under one
    // correlation id.
    assert_eq!(
        ops_of,
        [("cancel", None), ("action-cancel", Some("operator"))]
    );
    assert_eq!(entries[0].correlation_id, entries[1].correlation_id);
}
