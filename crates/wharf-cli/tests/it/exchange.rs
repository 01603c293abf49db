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

/// Two servers' databases and data dirs: B has tenant `acme` and a credential for A; A has a
/// signing key for `acme`/`p1` whose public half B trusts.
struct Pair {
    a_db: wharf_testkit::TestDb,
    b_db: wharf_testkit::TestDb,
    a_dir: tempfile::TempDir,
    b_dir: tempfile::TempDir,
    /// Where B ingests `acme`/`p1` (B not started yet).
    ingest: String,
    b_port: u16,
    /// A's credential at B.
    token: String,
}

impl Pair {
    async fn new() -> Pair {
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
        Pair {
            a_db,
            b_db,
            a_dir,
            b_dir,
            ingest,
            b_port,
            token: token.to_owned(),
        }
    }
}

impl Pair {
    /// `wharf emit` on A of a `sync_cursor` envelope for sequence `n` under `key`, to B; what
    /// it printed.
    fn emit(&self, config: &Path, n: u64, key: &str) -> String {
        let a = self.a_dir.path();
        let payload = a.join("payload.json");
        std::fs::write(
            &payload,
            json!({"producer_id": "wharf-a", "acknowledged_sequence": n,
                   "acknowledged_event_id": null, "version": 1})
            .to_string(),
        )
        .unwrap();
        ok(
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
                key,
                "--to",
                &self.ingest,
            ],
            &self.a_db.url(),
            a,
            Some(config),
        )
    }
}

#[tokio::test]
async fn a_emits_signed_envelopes_and_b_accepts_each_exactly_once_in_order() {
    let pair = Pair::new().await;
    let Pair {
        a_db,
        b_db,
        a_dir,
        b_dir,
        ingest,
        b_port,
        token,
    } = &pair;
    let (a, b) = (a_dir.path(), b_dir.path());
    let b_port = *b_port;
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
    for n in 1..=ENVELOPES {
        let emitted = pair.emit(&config, n, &format!("cursor-{n}"));
        assert!(emitted.starts_with("emitted"), "{emitted}");
    }
    // The same key again is the same envelope, not a new one.
    let again = pair.emit(&config, ENVELOPES, &format!("cursor-{ENVELOPES}"));
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

/// What `wharf … --json` printed.
fn json_of(args: &[&str], url: &str, data_dir: &Path, config: Option<&Path>) -> Value {
    let out = ok(args, url, data_dir, config);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

#[tokio::test]
async fn dead_letters_are_redriven_from_the_command_line_after_a_pause_and_b_accepts_each_once() {
    let pair = Pair::new().await;
    let (a, b) = (pair.a_dir.path(), pair.b_dir.path());
    let a_url = pair.a_db.url();
    let config = a.join("wharf.toml");
    let configure = |token: &str| {
        std::fs::write(
            &config,
            format!(
                "[http]\nallow_cidrs = [\"127.0.0.0/8\"]\n\n\
                 [[envelope.destinations]]\nurl = \"{}\"\nbearer_token = \"{token}\"\n",
                pair.ingest
            ),
        )
        .unwrap();
    };
    // A delivers with a credential B never issued: B answers 401 and each ends a dead letter.
    configure("not-a-credential-of-b");
    for n in 1..=2 {
        let emitted = pair.emit(&config, n, &format!("dl-{n}"));
        assert!(emitted.starts_with("emitted"), "{emitted}");
    }
    let b_server =
        Server::start_on(b, pair.b_port, &[], &[("DATABASE_URL", &pair.b_db.url())]).await;
    ok(&["drain"], &a_url, a, Some(&config));
    let dead = json_of(
        &[
            "dead-letters",
            "--tenant",
            "acme",
            "--project",
            "p1",
            "--json",
        ],
        &a_url,
        a,
        None,
    );
    let dead = dead["items"].as_array().unwrap().clone();
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert!(
        dead.iter().all(|d| d["error_code"] == "http_4xx_401"),
        "{dead:?}"
    );

    // The operator fixes the credential and pauses the kind for this tenant while checking.
    configure(&pair.token);
    let paused = json_of(
        &[
            "kinds",
            "pause",
            "envelope",
            "--tenant",
            "acme",
            "--note",
            "credential rotated",
            "--json",
        ],
        &a_url,
        a,
        Some(&config),
    );
    assert_eq!(paused["created"], true, "{paused}");

    // Dry run first: both, in emission order, nothing written.
    let actions_before: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.action")
        .fetch_one(&pair.a_db.pool)
        .await
        .unwrap();
    let dry = json_of(
        &["redrive", "--tenant", "acme", "--project", "p1", "--json"],
        &a_url,
        a,
        Some(&config),
    );
    assert_eq!(dry["dry_run"], true);
    let originals: Vec<&Value> = dry["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["original_id"])
        .collect();
    let dead_ids: Vec<&Value> = dead.iter().map(|d| &d["id"]).collect();
    let mut sorted = dead_ids.clone();
    sorted.sort_by_key(|v| v.as_i64());
    assert_eq!(originals, sorted, "emission order");
    assert!(
        dry["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["action_id"].is_null())
    );
    let actions_now: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.action")
        .fetch_one(&pair.a_db.pool)
        .await
        .unwrap();
    assert_eq!(actions_now, actions_before);

    let applied = json_of(
        &[
            "redrive",
            "--tenant",
            "acme",
            "--project",
            "p1",
            "--apply",
            "--json",
        ],
        &a_url,
        a,
        Some(&config),
    );
    assert_eq!(applied["items"].as_array().unwrap().len(), 2, "{applied}");
    // Twice is once.
    let again = json_of(
        &[
            "redrive",
            "--tenant",
            "acme",
            "--project",
            "p1",
            "--apply",
            "--json",
        ],
        &a_url,
        a,
        Some(&config),
    );
    assert_eq!(again["items"], json!([]), "{again}");

    // Paused: a drain leaves the redriven actions waiting, and the list says why.
    ok(&["drain"], &a_url, a, Some(&config));
    let waiting = json_of(
        &["actions", "list", "--state", "ADMITTED", "--json"],
        &a_url,
        a,
        Some(&config),
    );
    assert_eq!(waiting["items"].as_array().unwrap().len(), 2, "{waiting}");
    assert_eq!(waiting["paused"][0]["kind"], "envelope", "{waiting}");
    assert_eq!(waiting["paused"][0]["tenant_id"], "acme", "{waiting}");
    let listed = ok(&["kinds", "list"], &a_url, a, Some(&config));
    assert!(
        listed.contains("envelope") && listed.contains("paused for 1 tenant(s)"),
        "{listed}"
    );

    ok(
        &["kinds", "resume", "envelope", "--tenant", "acme"],
        &a_url,
        a,
        Some(&config),
    );
    ok(&["drain"], &a_url, a, Some(&config));
    b_server.interrupt();

    let states: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, state FROM wharf.action WHERE kind = 'envelope' ORDER BY id")
            .fetch_all(&pair.a_db.pool)
            .await
            .unwrap();
    let ended: Vec<&str> = states.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(ended, ["FAILED", "FAILED", "DONE", "DONE"], "{states:?}");
    // B holds each envelope once, with the event ids A first sent.
    let event_ids: Vec<String> =
        sqlx::query_scalar("SELECT event_id::text FROM wharf.inbox_identities ORDER BY 1")
            .fetch_all(&pair.b_db.pool)
            .await
            .unwrap();
    let mut sent: Vec<String> = dry["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["event_id"].as_str().unwrap().to_owned())
        .collect();
    sent.sort();
    assert_eq!(event_ids, sent);

    let audit = json_of(&["audit", "--json"], &a_url, a, None);
    let ops: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["operation"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["pause", "redrive", "redrive", "resume"]);
}
