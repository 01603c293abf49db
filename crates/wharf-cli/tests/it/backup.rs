//! `wharf backup`, `wharf restore`, `wharf verify` against real databases: the keys travel
//! with the dump, encrypted, and a restore changes nothing until it knows it can finish.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Log, wharf};

/// The passphrase the tests back up with.
const PASSPHRASE: &str = "correct horse battery staple";

/// How long a started `wharf work` may take to show in `pg_stat_activity`.
const WORKER_CONNECT_MS_MAX: u64 = 60_000;

/// `wharf <args>` with the database `url`, the data dir `data_dir` and `env`.
fn run(args: &[&str], url: &str, data_dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = wharf();
    cmd.args(args)
        .env("DATABASE_URL", url)
        .env("WHARF_DATA_DIR", data_dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// As [`run`], asserting success; returns stdout and stderr.
fn ok(args: &[&str], url: &str, data_dir: &Path, env: &[(&str, &str)]) -> String {
    let out = run(args, url, data_dir, env);
    assert!(
        out.status.success(),
        "wharf {args:?} failed: {}",
        text(&out)
    );
    text(&out)
}

/// As [`run`], asserting failure; returns stdout and stderr.
fn refused(args: &[&str], url: &str, data_dir: &Path, env: &[(&str, &str)]) -> String {
    let out = run(args, url, data_dir, env);
    assert!(
        !out.status.success(),
        "wharf {args:?} succeeded: {}",
        text(&out)
    );
    text(&out)
}

fn with_passphrase() -> [(&'static str, &'static str); 1] {
    [("WHARF_BACKUP_PASSPHRASE", PASSPHRASE)]
}

/// A source database with a tenant and a signing key sealed under `data_dir`'s server key,
/// and a webhook key in `data_dir`.
async fn source_with_keys(data_dir: &Path) -> wharf_testkit::TestDb {
    let source = wharf_testkit::TestDb::new().await;
    sqlx::query("INSERT INTO wharf.inbox_tenants (tenant_id) VALUES ('acme')")
        .execute(&source.pool)
        .await
        .unwrap();
    ok(
        &[
            "signing-key",
            "generate",
            "--tenant",
            "acme",
            "--project",
            "p1",
        ],
        &source.url(),
        data_dir,
        &[],
    );
    ok(&["webhook-key", "show"], &source.url(), data_dir, &[]);
    assert!(data_dir.join("server.key").is_file());
    assert!(data_dir.join("webhook.key").is_file());
    source
}

async fn tenants(db: &wharf_testkit::TestDb) -> Vec<String> {
    sqlx::query_scalar("SELECT tenant_id::text FROM wharf.inbox_tenants ORDER BY 1")
        .fetch_all(&db.pool)
        .await
        .unwrap()
}

async fn mark(db: &wharf_testkit::TestDb, tenant: &str) {
    sqlx::query("INSERT INTO wharf.inbox_tenants (tenant_id) VALUES ($1)")
        .bind(tenant)
        .execute(&db.pool)
        .await
        .unwrap();
}

/// The scope's current signing key, opened with the server key in `data_dir`.
async fn open_signing_key(
    db: &wharf_testkit::TestDb,
    data_dir: &Path,
) -> Result<String, wharf::outbound::Error> {
    use wharf::outbound::SigningKeySource as _;
    let text = std::fs::read_to_string(data_dir.join("server.key")).unwrap();
    let server_key = wharf::outbound::ServerKey::from_base64(&text).unwrap();
    let source = wharf::outbound::SealedKeySource::new(server_key);
    let mut conn = db.pool.acquire().await.unwrap();
    let scope = wharf::outbound::Scope::new("acme", "p1");
    source.current(&mut conn, &scope).await.map(|k| k.key_id)
}

#[tokio::test]
async fn backup_then_restore_round_trips_the_database_and_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    let source = source_with_keys(&old).await;
    let file = dir.path().join("wharf.backup");
    let file = file.to_str().unwrap();
    let printed = ok(
        &["backup", "--out", file],
        &source.url(),
        &old,
        &with_passphrase(),
    );
    assert!(printed.contains("server.key (from "), "{printed}");
    assert!(printed.contains("encrypted in the backup"), "{printed}");

    // Neither key is in the file in clear, as text or as bytes.
    let written = std::fs::read(file).unwrap();
    assert!(written.starts_with(b"WHARFBK\n"));
    for name in ["server.key", "webhook.key"] {
        let key_text = std::fs::read_to_string(old.join(name)).unwrap();
        let key_text = key_text.trim();
        assert!(
            !written
                .windows(key_text.len())
                .any(|w| w == key_text.as_bytes())
        );
        use base64::Engine as _;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(key_text)
            .unwrap();
        assert!(!written.windows(raw.len()).any(|w| w == raw));
    }
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(file).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the backup is private: {mode:o}");

    let target = wharf_testkit::TestDb::new().await;
    // A database that already has wharf's schema is not overwritten by accident.
    let out = refused(&["restore", file], &target.url(), &new, &with_passphrase());
    assert!(out.contains("--replace"), "{out}");
    assert!(!new.join("server.key").exists());

    let printed = ok(
        &["restore", "--replace", file],
        &target.url(),
        &new,
        &with_passphrase(),
    );
    assert!(printed.contains("restored from"), "{printed}");
    assert!(printed.contains("server.key: written at"), "{printed}");
    assert_eq!(tenants(&target).await, ["acme"]);
    for name in ["server.key", "webhook.key"] {
        assert_eq!(
            std::fs::read(new.join(name)).unwrap(),
            std::fs::read(old.join(name)).unwrap(),
            "{name}"
        );
        let mode = std::fs::metadata(new.join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name}: {mode:o}");
    }
    // The signing key generated before the backup opens under the restored server key,
    // and the restored server signs with the same webhook key.
    let key_id = open_signing_key(&target, &new).await.unwrap();
    assert_eq!(key_id, open_signing_key(&source, &old).await.unwrap());
    assert_eq!(
        ok(&["webhook-key", "show"], &target.url(), &new, &[]),
        ok(&["webhook-key", "show"], &source.url(), &old, &[])
    );
    let report = ok(&["verify", "--json"], &target.url(), &new, &[]);
    let report: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    assert_eq!(report["ok"], true, "{report}");

    // Restoring again over the same keys keeps them (nothing to replace).
    let printed = ok(
        &["restore", "--replace", file],
        &target.url(),
        &new,
        &with_passphrase(),
    );
    assert!(
        printed.contains("server.key: already the backup's"),
        "{printed}"
    );
}

#[tokio::test]
async fn a_wrong_passphrase_or_a_damaged_file_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    let source = source_with_keys(&old).await;
    let file = dir.path().join("wharf.backup");
    let file = file.to_str().unwrap();
    // From a file this time; its trailing newline is not part of the passphrase.
    let passphrase_file = dir.path().join("passphrase");
    std::fs::write(&passphrase_file, format!("{PASSPHRASE}\n")).unwrap();
    let passphrase_file = passphrase_file.to_str().unwrap();
    ok(
        &[
            "backup",
            "--out",
            file,
            "--passphrase-file",
            passphrase_file,
        ],
        &source.url(),
        &old,
        &[],
    );

    let target = wharf_testkit::TestDb::new().await;
    mark(&target, "target-only").await;
    let wrong = [("WHARF_BACKUP_PASSPHRASE", "correct horse battery stapler")];
    let out = refused(&["restore", "--replace", file], &target.url(), &new, &wrong);
    assert!(out.contains("wrong passphrase"), "{out}");
    assert_eq!(tenants(&target).await, ["target-only"]);
    assert!(!new.exists(), "the data dir was not even made");

    // No passphrase at all: refused, saying how to give one.
    let out = refused(&["restore", "--replace", file], &target.url(), &new, &[]);
    assert!(out.contains("--passphrase-file"), "{out}");
    assert!(out.contains("WHARF_BACKUP_PASSPHRASE"), "{out}");
    assert_eq!(tenants(&target).await, ["target-only"]);

    // One byte of the dump changed: found before anything is touched.
    let mut bytes = std::fs::read(file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    let damaged = dir.path().join("damaged.backup");
    std::fs::write(&damaged, &bytes).unwrap();
    let out = refused(
        &["restore", "--replace", damaged.to_str().unwrap()],
        &target.url(),
        &new,
        &with_passphrase(),
    );
    assert!(out.contains("dump is damaged"), "{out}");
    assert_eq!(tenants(&target).await, ["target-only"]);
    assert!(!new.exists());

    // The right passphrase, from the same file: restored.
    ok(
        &[
            "restore",
            "--replace",
            file,
            "--passphrase-file",
            passphrase_file,
        ],
        &target.url(),
        &new,
        &[],
    );
    assert_eq!(tenants(&target).await, ["acme"]);
    assert_eq!(
        std::fs::read(new.join("server.key")).unwrap(),
        std::fs::read(old.join("server.key")).unwrap()
    );
}

#[tokio::test]
async fn a_backup_without_a_passphrase_is_refused_unless_without_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    let source = source_with_keys(&old).await;
    let file = dir.path().join("wharf.backup");
    let file = file.to_str().unwrap();
    let out = refused(&["backup", "--out", file], &source.url(), &old, &[]);
    assert!(out.contains("no passphrase"), "{out}");
    assert!(out.contains("--without-keys"), "{out}");
    assert!(!Path::new(file).exists());
    // A passphrase too short to resist guessing is refused too.
    let short = [("WHARF_BACKUP_PASSPHRASE", "hunter2")];
    let out = refused(&["backup", "--out", file], &source.url(), &old, &short);
    assert!(out.contains("passphrase has 7 bytes"), "{out}");

    let printed = ok(
        &["backup", "--out", file, "--without-keys"],
        &source.url(),
        &old,
        &[],
    );
    assert!(printed.contains("NOT in this backup"), "{printed}");
    let old_abs = std::path::absolute(&old).unwrap();
    for name in ["server.key", "webhook.key"] {
        let path = old_abs.join(name);
        assert!(
            printed.contains(&format!("{name}: {}", path.display())),
            "{printed}"
        );
    }
    let written = std::fs::read(file).unwrap();
    let server_key = std::fs::read_to_string(old.join("server.key")).unwrap();
    let server_key = server_key.trim().as_bytes();
    assert!(!written.windows(server_key.len()).any(|w| w == server_key));

    // It restores without a passphrase, warns that it carries no keys, and writes none.
    let target = wharf_testkit::TestDb::new().await;
    let printed = ok(&["restore", "--replace", file], &target.url(), &new, &[]);
    assert!(printed.contains("carries no keys"), "{printed}");
    assert_eq!(tenants(&target).await, ["acme"]);
    assert!(!new.join("server.key").exists());
    assert!(!new.join("webhook.key").exists());
}

#[tokio::test]
async fn a_plain_pg_dump_of_an_older_wharf_still_restores() {
    let dir = tempfile::tempdir().unwrap();
    let source = wharf_testkit::TestDb::new().await;
    mark(&source, "acme").await;
    // What `wharf backup` wrote before it carried keys.
    let file = dir.path().join("old.dump");
    let bin = wharf_pg::Binaries::locate().unwrap().bin_dir;
    let status = std::process::Command::new(bin.join("pg_dump"))
        .args([
            "--format=custom",
            "--schema=wharf",
            "--no-owner",
            "--no-privileges",
        ])
        .arg("--file")
        .arg(&file)
        .arg("--dbname")
        .arg(source.url())
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let target = wharf_testkit::TestDb::new().await;
    let data = dir.path().join("new");
    let printed = ok(
        &["restore", "--replace", file.to_str().unwrap()],
        &target.url(),
        &data,
        &with_passphrase(),
    );
    assert!(printed.contains("plain pg_dump file"), "{printed}");
    assert!(printed.contains("carries no keys"), "{printed}");
    assert_eq!(tenants(&target).await, ["acme"]);
    assert!(!data.join("server.key").exists());
}

#[tokio::test]
async fn a_different_key_in_place_is_replaced_only_with_replace() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    let source = source_with_keys(&old).await;
    let file = dir.path().join("wharf.backup");
    let file = file.to_str().unwrap();
    ok(
        &["backup", "--out", file],
        &source.url(),
        &old,
        &with_passphrase(),
    );

    // A target without a schema, whose data dir has a server key of its own.
    let target = wharf_testkit::TestDb::new().await;
    sqlx::query("DROP SCHEMA wharf CASCADE")
        .execute(&target.pool)
        .await
        .unwrap();
    std::fs::create_dir_all(&new).unwrap();
    let theirs = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n";
    std::fs::write(new.join("server.key"), theirs).unwrap();
    let out = refused(&["restore", file], &target.url(), &new, &with_passphrase());
    assert!(out.contains("holds another key"), "{out}");
    assert!(out.contains("--replace"), "{out}");
    assert_eq!(
        std::fs::read_to_string(new.join("server.key")).unwrap(),
        theirs
    );
    assert!(!new.join("webhook.key").exists(), "nothing was written");
    let schema: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'wharf')")
            .fetch_one(&target.pool)
            .await
            .unwrap();
    assert!(!schema, "nothing was restored");

    // A key given inline that is not the backup's is refused even with --replace.
    let inline = [
        ("WHARF_BACKUP_PASSPHRASE", PASSPHRASE),
        ("WHARF_OUTBOUND__SERVER_KEY", theirs.trim()),
    ];
    let out = refused(
        &["restore", "--replace", file],
        &target.url(),
        &new,
        &inline,
    );
    assert!(out.contains("[outbound] server_key inline"), "{out}");

    let printed = ok(
        &["restore", "--replace", file],
        &target.url(),
        &new,
        &with_passphrase(),
    );
    assert!(printed.contains("server.key: replaced at"), "{printed}");
    assert_eq!(
        std::fs::read(new.join("server.key")).unwrap(),
        std::fs::read(old.join("server.key")).unwrap()
    );
    open_signing_key(&target, &new).await.unwrap();
}

#[tokio::test]
async fn restore_refuses_while_a_worker_uses_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    let source = source_with_keys(&old).await;
    let file = dir.path().join("wharf.backup");
    let file = file.to_str().unwrap();
    ok(
        &["backup", "--out", file],
        &source.url(),
        &old,
        &with_passphrase(),
    );

    let target = wharf_testkit::TestDb::new().await;
    mark(&target, "target-only").await;
    let mut worker = wharf()
        .arg("work")
        .env("DATABASE_URL", target.url())
        .env("WHARF_DATA_DIR", dir.path().join("worker"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Log::collect(worker.stderr.take().unwrap());
    // Wait until the executor has connected: by then `wharf work` has finished starting up,
    // and the one-off probe connection it opens first (also named "wharf work", see
    // `attempt_open`) is closed, so the pids read here are the ones a restore finds. Reading a
    // pid earlier once picked the probe, gone by the restore (a CI failure).
    let started = Instant::now();
    let pids = loop {
        let pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity
              WHERE datname = current_database() AND application_name = 'wharf work'
                AND EXISTS (SELECT FROM pg_stat_activity
                             WHERE datname = current_database()
                               AND application_name = 'wharf executor')",
        )
        .fetch_all(&target.pool)
        .await
        .unwrap();
        if !pids.is_empty() {
            break pids;
        }
        assert!(
            started.elapsed() < Duration::from_millis(WORKER_CONNECT_MS_MAX),
            "wharf work never connected: {}",
            log.text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let out = refused(
        &["restore", "--replace", file],
        &target.url(),
        &new,
        &with_passphrase(),
    );
    assert!(out.contains("stop them first"), "{out}");
    assert!(
        pids.iter()
            .any(|pid| out.contains(&format!("backend pid {pid}: \"wharf work\""))),
        "none of wharf work's backends {pids:?} is named: {out}"
    );
    assert_eq!(
        tenants(&target).await,
        ["target-only"],
        "the schema was not touched"
    );
    assert!(!new.exists(), "no key was written");

    // SAFETY: kill has no memory-safety preconditions; the pid is our own child's.
    unsafe { libc::kill(worker.id() as i32, libc::SIGTERM) };
    let status = worker.wait().unwrap();
    assert!(status.success(), "wharf work: {status}: {}", log.finish());

    // Stopped (its backends gone, which PostgreSQL finishes a moment after the process):
    // the restore goes ahead.
    let stopped = Instant::now();
    loop {
        let left: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND application_name LIKE 'wharf %'",
        )
        .fetch_one(&target.pool)
        .await
        .unwrap();
        if left == 0 {
            break;
        }
        assert!(
            stopped.elapsed() < Duration::from_millis(WORKER_CONNECT_MS_MAX),
            "wharf work's connections stayed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ok(
        &["restore", "--replace", file],
        &target.url(),
        &new,
        &with_passphrase(),
    );
    assert_eq!(tenants(&target).await, ["acme"]);
}

#[tokio::test]
async fn verify_fails_loudly_on_a_broken_invariant() {
    let db = wharf_testkit::TestDb::new().await;
    // An action written behind wharf's back without its key row (0060): a second enqueue of
    // its key would not be refused.
    sqlx::query(
        "INSERT INTO wharf.action_live (kind, tenant_id, lane_key, idempotency_key, content_digest,
                                        at_most_once, instance_level, state, max_attempts,
                                        payload, run_at)
         VALUES ('noop', 't', 'lane', 'k1', decode(repeat('00', 32), 'hex'), false, false,
                 'ADMITTED', 3, '{\"secret\": 1}', now())",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let out = wharf()
        .args(["verify"])
        .env("DATABASE_URL", db.url())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FAIL action_without_key"), "{stdout}");
}
