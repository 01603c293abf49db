//! `wharf bench …` with tiny sizes: every code path runs, the work is checked, the JSON parses.
//! No timed assertion: these machines are shared, and the figures are BENCHMARKS.md's business.

use serde_json::Value;

use crate::support::wharf;

/// Runs `wharf bench <args>` against `url` and returns every JSON line it printed; the last one
/// must be the summary.
fn bench(args: &[&str], url: &str) -> Vec<Value> {
    let out = wharf()
        .arg("bench")
        .args(args)
        .env("DATABASE_URL", url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "wharf bench {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.last().expect("a JSON summary line");
    assert_eq!(last["summary"], true, "{last}");
    lines
}

#[tokio::test]
async fn inbox_accepts_every_envelope_on_both_endpoints() {
    let db = wharf_testkit::TestDb::new().await;
    let lines = bench(
        &[
            "inbox",
            "--envelopes",
            "30",
            "--streams",
            "3",
            "--batch",
            "1,7",
            "--runs",
            "1",
            "--baseline-seconds",
            "0",
            "--json",
        ],
        &db.url(),
    );
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["transport"], "http");
    assert!(lines[0]["baseline"]["healthz_per_second"].as_f64().unwrap() > 0.0);
    let results = lines[0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        assert_eq!(r["envelopes"], 30);
        assert!(r["envelopes_per_second"].as_f64().unwrap() > 0.0);
        // The resident set around the send phase (Linux), and what it grew by.
        let rss = &r["rss_mib"];
        let (before, peak) = (
            rss["before"].as_f64().unwrap(),
            rss["peak"].as_f64().unwrap(),
        );
        assert!(before > 0.0 && peak > 0.0, "{rss}");
        assert_eq!(rss["growth"].as_f64().unwrap(), (peak - before).max(0.0));
    }
    assert!(lines[1]["by_batch"][0]["rss_growth_mib"].as_f64().is_some());
    // The run checked cursors and audit itself; the database agrees.
    let accepted: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM wharf.inbox_audit WHERE outcome = 'accept-delayed'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(accepted, 60);
}

#[tokio::test]
async fn inbox_library_transport_skips_http() {
    let db = wharf_testkit::TestDb::new().await;
    let lines = bench(
        &[
            "inbox",
            "--transport",
            "library",
            "--envelopes",
            "10",
            "--streams",
            "2",
            "--batch",
            "1,5",
            "--runs",
            "1",
            "--baseline-seconds",
            "0",
            "--json",
        ],
        &db.url(),
    );
    assert_eq!(lines[1]["transport"], "library");
    assert!(lines[0]["baseline"]["healthz_per_second"].is_null());
}

#[tokio::test]
async fn ceiling_reads_pgbench() {
    let db = wharf_testkit::TestDb::new().await;
    let lines = bench(
        &[
            "ceiling",
            "--script",
            "insert",
            "--clients",
            "2",
            "--seconds",
            "1",
            "--json",
        ],
        &db.url(),
    );
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["measured"]["script"], "insert");
    assert!(lines[0]["measured"]["tps"].as_f64().unwrap() > 0.0);
}

#[tokio::test]
async fn bench_refuses_a_database_with_other_tenants() {
    let db = wharf_testkit::TestDb::new().await;
    sqlx::query("INSERT INTO wharf.inbox_tenants (tenant_id) VALUES ('acme')")
        .execute(&db.pool)
        .await
        .unwrap();
    let out = wharf()
        .args(["bench", "inbox", "--envelopes", "1", "--runs", "1"])
        .env("DATABASE_URL", db.url())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--shared-database"));
}

#[tokio::test]
async fn outbox_drains_every_action_once_as_compare_sh_calls_it() {
    let db = wharf_testkit::TestDb::new().await;
    // Exactly the flags bench/compare.sh passes.
    let lines = bench(
        &[
            "outbox",
            "--n",
            "60",
            "--workers",
            "4",
            "--runs",
            "1",
            "--ceiling-seconds",
            "0",
            "--json",
        ],
        &db.url(),
    );
    assert_eq!(lines.len(), 2);
    let run = &lines[0];
    assert_eq!(run["drained"], 60);
    assert!(run["claim_ms"]["count"].as_u64().unwrap() >= 1);
    assert_eq!(run["fence_ms"]["count"], 60);
    assert!(lines[1]["jobs_per_second"].as_f64().unwrap() > 0.0);
}

#[tokio::test]
async fn outbox_backlog_sweep_reports_each_size() {
    let db = wharf_testkit::TestDb::new().await;
    let lines = bench(
        &[
            "outbox",
            "--n",
            "20",
            "--backlog",
            "50,120",
            "--backlog-lanes",
            "7",
            "--executors",
            "2",
            "--runs",
            "1",
            "--ceiling-seconds",
            "0",
            "--json",
        ],
        &db.url(),
    );
    assert_eq!(lines.len(), 3);
    let backlogs = lines[2]["backlogs"].as_array().unwrap();
    assert_eq!(backlogs.len(), 2);
    assert_eq!(backlogs[1]["backlog"], 120);
    for run in &lines[..2] {
        assert!(run["drained"].as_u64().unwrap() >= 20, "{run}");
    }
    // Without --keep-backlog nothing of the benchmark is left behind.
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.action")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

#[tokio::test]
async fn outbox_backlog_sweep_tops_up_again_and_again_with_new_keys() {
    // Each run drains N off the front and tops the backlog up again. Drains that leave the
    // same count once gave two top-ups the same keys, and the third run failed with "already
    // existed" (seen with --runs 3 at 100,000 lanes).
    let db = wharf_testkit::TestDb::new().await;
    let lines = bench(
        &[
            "outbox",
            "--n",
            "20",
            "--backlog",
            "30",
            "--backlog-lanes",
            "7",
            "--runs",
            "4",
            "--ceiling-seconds",
            "0",
            "--json",
        ],
        &db.url(),
    );
    assert_eq!(lines.len(), 5, "{lines:?}");
    for run in &lines[..4] {
        assert!(run["drained"].as_u64().unwrap() >= 20, "{run}");
    }
    assert_eq!(lines[4]["backlogs"][0]["backlog"], 30);
}

#[tokio::test]
async fn latency_starts_every_action_once() {
    let db = wharf_testkit::TestDb::new().await;
    let lines = bench(
        &[
            "latency",
            "--rate",
            "40",
            "--seconds",
            "1",
            "--warmup-seconds",
            "0",
            "--notify",
            "on,off",
            "--runs",
            "1",
            "--json",
        ],
        &db.url(),
    );
    assert_eq!(lines.len(), 3);
    for run in &lines[..2] {
        assert_eq!(run["measured"], 40, "{run}");
    }
    assert_eq!(lines[2]["by_notify"].as_array().unwrap().len(), 2);
}
