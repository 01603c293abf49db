//! `GET /v1/tenants/{tenant}/signing-keys`: a tenant's receivers read the public keys its
//! envelopes are signed with, rotation keeps the old one listed, and nobody else reads them.

use serde_json::Value;
use wharf::outbound::{ServerKey, generate_signing_key};
use wharf_http::auth::OperatorToken;
use wharf_testkit::TestDb;

use crate::support::{http, serve};

const TOKEN: &str = "operator-secret";

#[tokio::test]
async fn a_tenant_reads_its_current_and_retired_signing_keys_and_no_one_elses() {
    let db = TestDb::new().await;
    for tenant in ["acme", "globex"] {
        wharf::inbox::create_tenant(&db.pool, tenant).await.unwrap();
    }
    let server_key = ServerKey::generate();
    let first = generate_signing_key(&db.pool, &server_key, "acme", "web")
        .await
        .unwrap();
    // Rotation: the new key is current, the first one retired and still listed.
    let second = generate_signing_key(&db.pool, &server_key, "acme", "web")
        .await
        .unwrap();
    generate_signing_key(&db.pool, &server_key, "acme", "api")
        .await
        .unwrap();
    let acme = wharf::inbox::issue_credential(&db.pool, "acme", "receiver", None)
        .await
        .unwrap()
        .token;
    let globex = wharf::inbox::issue_credential(&db.pool, "globex", "receiver", None)
        .await
        .unwrap()
        .token;
    let base = serve(wharf_http::app([wharf_http::signing_keys::routes(
        db.pool.clone(),
        OperatorToken::new(Some(TOKEN.into())),
    )]))
    .await;

    let (status, body) = get(
        &base,
        "/v1/tenants/acme/signing-keys?project=web".into(),
        Some(acme.clone()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let keys: Vec<(&str, &str, &str)> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["key_id"].as_str().unwrap(),
                k["state"].as_str().unwrap(),
                k["public_key"].as_str().unwrap(),
            )
        })
        .collect();
    let mut want = vec![
        (first.key_id.as_str(), "retired", first.public_key_base64()),
        (second.key_id.as_str(), "active", second.public_key_base64()),
    ];
    want.sort();
    let mut got: Vec<(&str, &str, String)> = keys
        .iter()
        .map(|(a, b, c)| (*a, *b, (*c).to_owned()))
        .collect();
    got.sort();
    assert_eq!(got, want);

    // Every project of the tenant without the filter; the operator reads it too.
    let (status, all) = get(
        &base,
        "/v1/tenants/acme/signing-keys".into(),
        Some(TOKEN.into()),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(all["items"].as_array().unwrap().len(), 3);

    // Another tenant's credential, none, or a wrong one: refused, nothing listed.
    let (status, body) = get(&base, "/v1/tenants/acme/signing-keys".into(), Some(globex)).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));
    let (status, _) = get(&base, "/v1/tenants/acme/signing-keys".into(), None).await;
    assert_eq!(status, 401);
    let (status, _) = get(
        &base,
        "/v1/tenants/acme/signing-keys".into(),
        Some("nope".into()),
    )
    .await;
    assert_eq!(status, 401);
    let (status, body) = get(
        &base,
        "/v1/tenants/acme/signing-keys?colour=red".into(),
        Some(acme),
    )
    .await;
    assert_eq!(status, 400, "{body}");
}

async fn get(base: &str, path: String, token: Option<String>) -> (u16, Value) {
    let mut req = http().get(format!("{base}{path}"));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let response = req.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json::<Value>().await.unwrap())
}
