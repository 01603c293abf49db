//! `GET /v1/webhook-keys`: the operator reads the keys receivers load; nobody else does.

use wharf_http::auth::OperatorToken;

const KEY_A: &str = "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
const KEY_B: &str = "whpk_PUAXw+hDiVqStwqnTRt+vJyYLM8uxJaMwM1V8Sr0Zgw=";

#[tokio::test]
async fn the_operator_reads_every_signing_key() {
    let app = wharf_http::app([wharf_http::webhook_keys::routes(
        vec![KEY_A.to_owned(), KEY_B.to_owned()],
        OperatorToken::new(Some("op".into())),
    )]);
    let base = crate::support::serve(app).await;
    let client = crate::support::http();
    let url = format!("{base}{}", wharf_http::webhook_keys::PATH);

    // (what, authorization header, expected status)
    let rows: [(&str, Option<&str>, u16); 3] = [
        ("no credential", None, 401),
        ("a wrong token", Some("Bearer nope"), 401),
        ("the operator token", Some("Bearer op"), 200),
    ];
    for (what, authorization, expected) in rows {
        let mut request = client.get(&url);
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), expected, "{what}");
        let body: serde_json::Value = response.json().await.unwrap();
        if expected == 200 {
            assert_eq!(
                body,
                serde_json::json!({"keys": [
                    {"algorithm": "Ed25519", "public_key": KEY_A},
                    {"algorithm": "Ed25519", "public_key": KEY_B},
                ]}),
                "{what}"
            );
        } else {
            assert_eq!(body["code"], "unauthorized", "{what}");
            assert!(body.get("keys").is_none(), "{what}");
        }
    }
}
