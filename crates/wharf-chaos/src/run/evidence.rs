//! What a run reads back at the end for the checker: `wharf verify`'s failing checks, the
//! actions, the inbox's identities, cursors and ingest audit, and the provider faults the sinks
//! answered.
//!
//! Owns: those queries (ad-hoc SQL: the harness reads wharf's tables as a test does). Must not
//! know: the rules they are checked against (`check.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::{PgPool, Row as _};

use crate::check::{ActionRow, AuditRow, Evidence, IdentityRow};
use crate::procs::{Launch, run_once};

/// `wharf verify --json`: the names of failing checks, empty when clean.
pub(crate) async fn verify(launch: &Launch) -> Vec<String> {
    let launch = launch.clone();
    let ran = tokio::task::spawn_blocking(move || {
        run_once(&launch, &["verify", "--json"], Duration::from_secs(120))
    })
    .await;
    let (ok, text) = match ran {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => return vec![format!("wharf verify did not run: {e:#}")],
        Err(e) => return vec![format!("wharf verify did not run: {e}")],
    };
    let report: serde_json::Value = match serde_json::from_str(text.trim()) {
        Ok(report) => report,
        Err(_) => return vec![format!("wharf verify printed no report: {text}")],
    };
    let mut failing: Vec<String> = report["checks"]
        .as_array()
        .map(|checks| {
            checks
                .iter()
                .filter(|c| c["violations"].as_u64().unwrap_or(1) > 0)
                .map(|c| c["name"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default();
    if failing.is_empty() && (!ok || report["ok"] != serde_json::Value::Bool(true)) {
        failing.push("wharf verify failed".to_owned());
    }
    failing
}

pub(crate) async fn action_rows(pool: &PgPool) -> anyhow::Result<Vec<ActionRow>> {
    let rows = sqlx::query(
        "SELECT id, idempotency_key, lane_key, state, stop_reason, error_code, attempt
           FROM wharf.action ORDER BY id",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| ActionRow {
            id: r.get(0),
            key: r.get(1),
            lane: r.get(2),
            state: r.get(3),
            stop_reason: r.get(4),
            error_code: r.get(5),
            attempt: r.get(6),
        })
        .collect())
}

pub(crate) async fn identity_rows(pool: &PgPool) -> anyhow::Result<Vec<IdentityRow>> {
    let rows = sqlx::query(
        "SELECT s.producer_id::text, i.producer_sequence::bigint, i.event_id
           FROM wharf.inbox_identities i JOIN wharf.inbox_streams s USING (stream_id)",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| IdentityRow {
            producer: r.get(0),
            sequence: r.get::<i64, _>(1) as u64,
            event_id: r.get(2),
        })
        .collect())
}

pub(crate) async fn cursors(pool: &PgPool) -> anyhow::Result<BTreeMap<String, u64>> {
    let rows = sqlx::query(
        "SELECT producer_id::text, acknowledged_sequence::bigint FROM wharf.inbox_streams",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.get(0), r.get::<i64, _>(1) as u64))
        .collect())
}

pub(crate) async fn audit_rows(pool: &PgPool) -> anyhow::Result<Vec<AuditRow>> {
    let rows = sqlx::query(
        "SELECT producer_id, event_id_sha256, outcome FROM wharf.inbox_audit
          WHERE action = 'ingest' AND producer_id IS NOT NULL AND event_id_sha256 IS NOT NULL",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| AuditRow {
            producer: r.get(0),
            event_id_sha256: r.get(1),
            outcome: r.get(2),
        })
        .collect())
}

pub(crate) fn provider_faults(evidence: &Evidence) -> BTreeMap<String, u64> {
    use crate::sink::{Answer, Channel};
    let mut out = BTreeMap::new();
    for effect in &evidence.effects {
        let name = match (effect.channel, effect.answer) {
            (_, Answer::Delivered) => continue,
            (Channel::Http, Answer::Refused) => "http_4xx",
            (Channel::Http, Answer::TempFailed) => "http_5xx",
            (Channel::Http, Answer::TimedOut) => "http_timeout",
            (Channel::Smtp, Answer::Refused) => "smtp_550",
            (Channel::Smtp, Answer::TempFailed) => "smtp_451",
            (Channel::Smtp, Answer::TimedOut) => "smtp_timeout",
        };
        *out.entry(name.to_owned()).or_insert(0) += 1;
    }
    out
}
