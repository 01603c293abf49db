//! `wharf webhook-key show` and `GET /v1/webhook-keys` print the one key the `webhook` kind
//! signs with, in the `whpk_…` form receivers load.

use crate::support::{Server, wharf};

/// RFC 8032 §7.1 TEST 1: the seed (standard base64) and its public key in `whpk_` form.
const SEED_B64: &str = "nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=";
const WHPK: &str = "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";

fn show(data_dir: &std::path::Path, env: &[(&str, &str)], json: bool) -> String {
    let mut cmd = wharf();
    cmd.arg("--data-dir")
        .arg(data_dir)
        .args(["webhook-key", "show"]);
    if json {
        cmd.arg("--json");
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn show_prints_the_configured_key_and_nothing_secret() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("WHARF_WEBHOOK__SIGNING_KEY", SEED_B64)];
    assert_eq!(show(dir.path(), &env, false), format!("{WHPK}\n"));
    let json: serde_json::Value = serde_json::from_str(&show(dir.path(), &env, true)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"keys": [{"algorithm": "Ed25519", "public_key": WHPK}]})
    );
    // A configured key is used as it is: no key file is made beside it.
    assert!(!dir.path().join("webhook.key").exists());

    let bad = wharf()
        .arg("--data-dir")
        .arg(dir.path())
        .args(["webhook-key", "show"])
        .env("WHARF_WEBHOOK__SIGNING_KEY", "not base64")
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(bad.stdout.is_empty());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("base64 of 32 bytes"));
}

/// Without a configured key, `show` makes `<data-dir>/webhook.key` as serve would, and the
/// server then answers the very same key at `/v1/webhook-keys` (to the operator only).
#[tokio::test]
async fn show_and_the_endpoint_agree_on_the_key_file() {
    let db = wharf_testkit::TestDb::new().await;
    let cwd = tempfile::tempdir().unwrap();
    let data_dir = cwd.path().join(".wharf");
    let first = show(&data_dir, &[], false);
    assert!(
        first.starts_with("whpk_") && first.ends_with("=\n"),
        "{first}"
    );
    assert_eq!(
        show(&data_dir, &[], false),
        first,
        "a second show made a new key"
    );
    let seed = std::fs::read_to_string(data_dir.join("webhook.key")).unwrap();
    assert!(!first.contains(seed.trim()), "the seed was printed");

    let server = Server::start(
        cwd.path(),
        &[],
        &[("DATABASE_URL", &db.url()), ("WHARF_OPERATOR_TOKEN", "op")],
    )
    .await;
    let client = crate::support::http();
    let url = format!("{}/v1/webhook-keys", server.base);
    let anonymous = client.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let answer: serde_json::Value = client
        .get(&url)
        .bearer_auth("op")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["keys"][0]["public_key"], first.trim());
    assert_eq!(answer["keys"].as_array().unwrap().len(), 1);
    server.interrupt();
}
