//! Two wharf servers and a producer over a real NATS JetStream (`WHARF_TEST_NATS_URL`): A emits
//! envelopes to a `nats://` destination and its executor publishes them; B's `serve` consumes
//! the stream (`[[inbox.jetstream]]`) and acknowledges each after its commit; `wharf send
//! --nats` publishes one more and prints B's answer from the reply subject.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, wharf};

const ENVELOPES: i64 = 5;

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

fn token(url: &str, dir: &Path, account: &str) -> String {
    let issued: Value = serde_json::from_str(
        ok(
            &[
                "credential",
                "issue",
                "--tenant",
                "acme",
                "--account",
                account,
                "--json",
            ],
            url,
            dir,
            None,
        )
        .trim(),
    )
    .unwrap();
    issued["token"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn envelopes_published_to_jetstream_are_acknowledged_by_the_consuming_wharf() {
    let Some(nats) = std::env::var("WHARF_TEST_NATS_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        let _ = writeln!(
            std::io::stderr(),
            "wharf-cli: the JetStream exchange test DID NOT RUN: set WHARF_TEST_NATS_URL \
             (a NATS server with JetStream; .ci/run starts one)"
        );
        return;
    };
    let unique = format!("{:x}", rand_suffix());
    let (stream, prefix) = (format!("WCLI{unique}"), format!("wcli{unique}"));
    let subject = format!("{prefix}.acme.p1");
    let authority = nats.trim_start_matches("nats://").trim_end_matches('/');

    let (a_db, b_db) = (
        wharf_testkit::TestDb::new().await,
        wharf_testkit::TestDb::new().await,
    );
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (a_dir.path(), b_dir.path());

    // B: a tenant, a credential for A and one for a laptop, A's public key and the laptop's.
    ok(&["tenant", "create", "acme"], &b_db.url(), b, None);
    let a_token = token(&b_db.url(), b, "wharf-a");
    let laptop_token = token(&b_db.url(), b, "laptop");
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
            keys[0]["public_key"].as_str().unwrap(),
        ],
        &b_db.url(),
        b,
        None,
    );
    let seed = ok(
        &[
            "key",
            "generate",
            "--tenant",
            "acme",
            "--project",
            "p1",
            "--key-id",
            "laptop-k",
        ],
        &b_db.url(),
        b,
        None,
    );
    let b_config = b.join("wharf.toml");
    std::fs::write(
        &b_config,
        format!(
            "[[inbox.jetstream]]\nurl = \"{nats}\"\nstream = \"{stream}\"\nconsumer = \"wharf\"\n\
             subjects = \"{prefix}.{{tenant}}.{{project}}\"\n"
        ),
    )
    .unwrap();
    let a_config = a.join("wharf.toml");
    std::fs::write(
        &a_config,
        format!(
            "[[envelope.destinations]]\nurl = \"nats://{authority}/\"\nbearer_token = \"{a_token}\"\n"
        ),
    )
    .unwrap();

    // A emits before anything runs: the envelopes wait in A's outbox.
    let destination = format!("nats://{authority}/{subject}");
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
                &destination,
            ],
            &a_db.url(),
            a,
            Some(&a_config),
        );
        assert!(emitted.starts_with("emitted"), "{emitted}");
    }

    let b_server = Server::start(
        b,
        &["--config", b_config.to_str().unwrap()],
        &[("DATABASE_URL", &b_db.url())],
    )
    .await;
    let a_server = Server::start(
        a,
        &["--config", a_config.to_str().unwrap()],
        &[("DATABASE_URL", &a_db.url())],
    )
    .await;

    // A producer from the command line, answered on its reply subject.
    let sent = ok(
        &[
            "send",
            "--nats",
            &nats,
            "--subject",
            &subject,
            "--tenant",
            "acme",
            "--project",
            "p1",
            "--token",
            &laptop_token,
            "--key-id",
            "laptop-k",
            "--key",
            seed.trim(),
            "--event-type",
            "sync_cursor",
            "--sequence",
            "1",
            "--payload",
            r#"{"producer_id":"laptop","acknowledged_sequence":0,"acknowledged_event_id":null,"version":1}"#,
        ],
        &b_db.url(),
        b,
        None,
    );
    assert!(sent.starts_with("accept-delayed (in-order)"), "{sent}");

    let started = Instant::now();
    loop {
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM wharf.action
              WHERE kind = 'envelope' AND state = 'DONE' AND readback_ref LIKE 'jetstream %'",
        )
        .fetch_one(&a_db.pool)
        .await
        .unwrap();
        let identities: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.inbox_identities")
            .fetch_one(&b_db.pool)
            .await
            .unwrap();
        if done == ENVELOPES && identities == ENVELOPES + 1 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{done} of {ENVELOPES} published, {identities} identities at B"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    a_server.interrupt();
    b_server.interrupt();
    let cursors: Vec<(String, String)> = sqlx::query_as(
        "SELECT producer_id::text, acknowledged_sequence::text FROM wharf.inbox_streams
          ORDER BY producer_id",
    )
    .fetch_all(&b_db.pool)
    .await
    .unwrap();
    assert_eq!(
        cursors,
        [
            ("laptop".to_owned(), "1".to_owned()),
            ("wharf-a".to_owned(), ENVELOPES.to_string())
        ]
    );
    if let Ok(producer) = wharf_nats::NatsProducer::connect(&nats, None).await {
        let _ = producer.delete_stream(&stream).await;
    }
}

/// A suffix no other run shares (stream names must not collide across parallel runs).
fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        ^ u128::from(std::process::id())
}

/// `serve` refuses a consumer that could not keep its promises before it listens or touches a
/// database: an ack wait shorter than the pipeline's budget, an unknown key, a bad subject
/// pattern. Needs no NATS.
#[test]
fn serve_refuses_a_jetstream_consumer_it_could_not_run_safely() {
    let dir = tempfile::tempdir().unwrap();
    let check = |entry: &str, expected: &[&str]| {
        let config = dir.path().join("wharf.toml");
        std::fs::write(
            &config,
            format!(
                "[inbox]\npeer_rate_per_s = 50\n\n[[inbox.jetstream]]\nurl = \"nats://127.0.0.1:4222\"\n\
                 stream = \"S\"\nconsumer = \"c\"\n{entry}"
            ),
        )
        .unwrap();
        let out = wharf()
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .args(["--database-url", "postgres://wharf@127.0.0.1:1/none"])
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{entry}: {stderr}");
        for part in expected {
            assert!(stderr.contains(part), "{part:?} not in {stderr}");
        }
        assert!(!stderr.contains("wharf serving"), "it listened: {stderr}");
    };
    check(
        "pipeline_ms_max = 10000\nack_wait_ms = 10999\n",
        &[
            "ack_wait_ms",
            "shorter than a message may spend in the pipeline",
        ],
    );
    check("ack_wiat_ms = 30000\n", &["ack_wiat_ms"]);
    check(
        "subjects = \"wharf.inbox.{tenant}\"\n",
        &["subjects", "{project}"],
    );
    check("in_flight_max = 0\n", &["in_flight_max"]);
}
