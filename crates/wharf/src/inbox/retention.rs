//! Payload retention (SPEC §3.7): expired inbox payloads are deleted in bounded batches by a
//! statement that names only the payload table; and the inbox's housekeeping, which `wharf
//! serve` runs on an interval: that retention, then the removal of revoked keys nothing
//! replayable depends on ([`super::remove_safe_keys`]).
//!
//! Owns: the batch bounds and the loops. Must not know identities, cursors or audit — which is
//! the point: they stay forever, so an event whose payload expired still answers
//! `ignore-duplicate` (or an identity conflict), never `accept`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::error::Error;
use crate::store::inbox as store;

/// How long payloads are kept by default (SPEC §3.7).
pub const PAYLOAD_RETENTION_DEFAULT: Duration = Duration::from_secs(90 * 24 * 3600);
/// Most payloads one delete statement removes. Keeps each statement's locks and WAL burst small
/// so retention never stalls ingest on the same tables (SPEC §3.7: at most 1,000).
pub const RETENTION_BATCH_MAX: usize = 1000;

/// Longest payload retention accepted, in days (100 years).
pub const PAYLOAD_RETENTION_DAYS_MAX: u64 = 36_500;
/// How often `serve` runs the housekeeping by default: one hour.
pub const HOUSEKEEPING_INTERVAL_MS_DEFAULT: u64 = 3_600_000;
/// Shortest housekeeping interval accepted: one second.
pub const HOUSEKEEPING_INTERVAL_MS_MIN: u64 = 1_000;
/// Longest housekeeping interval accepted: one day.
pub const HOUSEKEEPING_INTERVAL_MS_MAX: u64 = 86_400_000;
/// Most payload batches one housekeeping run deletes (the next run continues).
pub const HOUSEKEEPING_BATCHES_MAX: usize = 100;
/// The audit's operator for what the housekeeping does on its own.
pub const HOUSEKEEPING_OPERATOR: &str = "wharf-housekeeping";

/// What the inbox's housekeeping does, and how often ([`super::InboxSettings::housekeeping`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Housekeeping {
    /// Payloads older than this are deleted.
    pub payload_retention: Duration,
    /// Time between runs.
    pub interval: Duration,
}

/// What one housekeeping run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HousekeepingReport {
    /// Payloads deleted.
    pub payloads_deleted: u64,
    /// Revoked keys removed, as (tenant, project, key id).
    pub keys_removed: Vec<(String, String, String)>,
}

/// One housekeeping run: at most [`HOUSEKEEPING_BATCHES_MAX`] batches of expired payloads, then
/// at most [`super::KEY_REMOVALS_PER_RUN_MAX`] revoked keys. Safe beside other replicas doing
/// the same: deletes are idempotent and each key removal decides under the key's row lock.
pub async fn housekeep(
    pool: &sqlx::PgPool,
    settings: &Housekeeping,
) -> Result<HousekeepingReport, Error> {
    let payloads_deleted = run_retention(
        pool,
        settings.payload_retention,
        RETENTION_BATCH_MAX,
        HOUSEKEEPING_BATCHES_MAX,
    )
    .await?;
    let keys_removed = super::remove_safe_keys(pool, HOUSEKEEPING_OPERATOR).await?;
    Ok(HousekeepingReport {
        payloads_deleted,
        keys_removed,
    })
}

/// Runs [`housekeep`] every `settings.interval` (the first run at once) until `stop`
/// completes, logging what each run did; a failed run is logged and the next one tries again.
pub async fn housekeeping_loop(
    pool: sqlx::PgPool,
    settings: Housekeeping,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut stop = std::pin::pin!(stop);
    loop {
        match housekeep(&pool, &settings).await {
            Ok(report) => {
                for (tenant, project, key_id) in &report.keys_removed {
                    tracing::info!(tenant, project, key_id, "inbox: revoked key removed");
                }
                if report.payloads_deleted > 0 {
                    tracing::info!(
                        deleted = report.payloads_deleted,
                        "inbox: expired payloads deleted"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "inbox housekeeping failed; it runs again later"),
        }
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep(settings.interval) => {}
        }
    }
}

/// Deletes at most `batch_max` (≤ [`RETENTION_BATCH_MAX`]) payloads stored before
/// `older_than`, in one statement; returns how many were deleted. Call it until it returns
/// less than `batch_max`, or use [`run_retention`].
pub async fn delete_expired_payloads<'e>(
    ex: impl PgExecutor<'e>,
    older_than: DateTime<Utc>,
    batch_max: usize,
) -> Result<u64, Error> {
    if batch_max == 0 || batch_max > RETENTION_BATCH_MAX {
        return Err(Error::invalid(
            "batch_max",
            format!("must be 1..={RETENTION_BATCH_MAX}"),
        ));
    }
    let batch_max = i64::try_from(batch_max).expect("at most 1000");
    Ok(store::payloads_delete_expired(ex, older_than, batch_max).await?)
}

/// Deletes every payload older than `retention`, batch by batch, stopping after `batches_max`
/// batches (so one run is bounded even on a huge backlog; the next run continues). Returns how
/// many were deleted.
pub async fn run_retention(
    pool: &sqlx::PgPool,
    retention: Duration,
    batch_max: usize,
    batches_max: usize,
) -> Result<u64, Error> {
    let retention = chrono::Duration::from_std(retention)
        .map_err(|_| Error::invalid("retention", "too long"))?;
    let older_than = Utc::now() - retention;
    let mut total = 0;
    for _ in 0..batches_max {
        let deleted = delete_expired_payloads(pool, older_than, batch_max).await?;
        total += deleted;
        if deleted < batch_max as u64 {
            break;
        }
    }
    Ok(total)
}
