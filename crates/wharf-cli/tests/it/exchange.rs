//! Two wharf servers exchanging signed envelopes end to end: A emits, A's executor delivers
//! through the `envelope` kind, B's inbox verifies, sequences and acknowledges.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, free_port, wharf};

/// Envelopes A sends to B. Each `wharf emit` is a process of its own; a few dozen keep the test
/// quick while crossing several claim batches of the executor.
const ENVELOPES: u64 = 30;

fn ok(args: &[&str], url: &str, data_dir: &Path, config: Option<&Path>) -> String {
    let mut cmd = wharf();
    cmd.args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env("DATABASE_URL", url);
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "wharf {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test]
async fn a_emits_signed_envelopes_and_b_accepts_each_exactly_once_in_order() {
    let (a_db, b_db) = (
        wharf_testkit::TestDb::new().await,
        wharf_testkit::TestDb::new().await,
    );
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (a_dir.path(), b_dir.path());

    // B: a tenant and a credential for A.
    ok(&["tenant", "create", "acme"], &b_db.url(), b, None);
    let issued: Value = serde_json::from_str(
        ok(
            &[
                "credential",
                "issue",
                "--tenant",
                "acme",
                "--account",
                "wharf-a",
                "--json",
            ],
            &b_db.url(),
            b,
            None,
        )
        .trim(),
    )
    .unwrap();
    let token = issued["token"].as_str().unwrap();
    let b_port = free_port();
    let ingest = format!("http://127.0.0.1:{b_port}/v1/tenants/acme/projects/p1/envelopes");

    // A: a signing key, whose public half B learns; and where to deliver, with what credential.
    let keys: Value = serde_json::from_str(
        ok(
            &[
                "signing-key",
                "generate",
                "--tenant",
                "acme",
                "--project",
                "p1",
                "--json",
            ],
            &a_db.url(),
            a,
            None,
        )
        .trim(),
    )
    .unwrap();
    let key_id = keys[0]["key_id"].as_str().unwrap();
    let public_key = keys[0]["public_key"].as_str().unwrap();
    ok(
        &[
            "key",
            "add",
            "--tenant",
            "acme",
            "--project",
            "p1",
            "--key-id",
            key_id,
            "--public-key",
            public_key,
        ],
        &b_db.url(),
        b,
        None,
    );
    let config = a.join("wharf.toml");
    std::fs::write(
        &config,
        format!(
            "[http]\nallow_cidrs = [\"127.0.0.0/8\"]\n\n\
             [[envelope.destinations]]\nurl = \"{ingest}\"\nbearer_token = \"{token}\"\n"
        ),
    )
    .unwrap();

    // A emits before anything runs: the envelopes wait in A's outbox.
    let payload = a.join("payload.json");
    for n in 1..=ENVELOPES {
        std::fs::write(
            &payload,
            json!({"producer_id": "wharf-a", "acknowledged_sequence": n,
                   "acknowledged_event_id": null, "version": 1})
            .to_string(),
        )
        .unwrap();
        let emitted = ok(
            &[
                "emit",
                "--tenant",
                "acme",
                "--project",
                "p1",
                "--event-type",
                "sync_cursor",
                "--payload",
                payload.to_str().unwrap(),
                "--idempotency-key",
                &format!("cursor-{n}"),
                "--to",
                &ingest,
            ],
            &a_db.url(),
            a,
            Some(&config),
        );
        assert!(emitted.starts_with("emitted"), "{emitted}");
    }
    // The same key again is the same envelope, not a new one.
    let again = ok(
        &[
            "emit",
            "--tenant",
            "acme",
            "--project",
            "p1",
            "--event-type",
            "sync_cursor",
            "--payload",
            payload.to_str().unwrap(),
            "--idempotency-key",
            &format!("cursor-{ENVELOPES}"),
            "--to",
            &ingest,
        ],
        &a_db.url(),
        a,
        Some(&config),
    );
    assert!(again.starts_with("already emitted"), "{again}");

    let b_server = Server::start_on(b, b_port, &[], &[("DATABASE_URL", &b_db.url())]).await;
    let a_server = Server::start(
        a,
        &["--config", config.to_str().unwrap()],
        &[("DATABASE_URL", &a_db.url())],
    )
    .await;

    let started = Instant::now();
    loop {
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM wharf.action WHERE kind = 'envelope' AND state = 'DONE'",
        )
        .fetch_one(&a_db.pool)
        .await
        .unwrap();
        if done == ENVELOPES as i64 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "only {done} of {ENVELOPES} envelopes were delivered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    a_server.interrupt();
    b_server.interrupt();

    let streams: Value = serde_json::from_str(
        ok(
            &[
                "streams",
                "show",
                "--tenant",
                "acme",
                "--project",
                "p1",
                "--json",
            ],
            &b_db.url(),
            b,
            None,
        )
        .trim(),
    )
    .unwrap();
    assert_eq!(streams.as_array().unwrap().len(), 1, "{streams}");
    assert_eq!(streams[0]["acknowledged_sequence"], ENVELOPES, "{streams}");
    assert_eq!(streams[0]["retained_ahead"], 0, "{streams}");
    let identities: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.inbox_identities")
        .fetch_one(&b_db.pool)
        .await
        .unwrap();
    assert_eq!(identities, ENVELOPES as i64, "one identity per envelope");
    let verified = ok(&["verify"], &b_db.url(), b, None);
    assert!(!verified.contains("FAIL"), "{verified}");
}
