//! Payload retention (SPEC §3.7): expired inbox payloads are deleted in bounded batches by a
//! statement that names only the payload table.
//!
//! Owns: the batch bound and the loop. Must not know identities, cursors or audit — which is the
//! point: they stay forever, so an event whose payload expired still answers
//! `ignore-duplicate` (or an identity conflict), never `accept`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::error::InboxError;
use crate::store::inbox as store;

/// How long payloads are kept by default (SPEC §3.7).
pub const PAYLOAD_RETENTION_DEFAULT: Duration = Duration::from_secs(90 * 24 * 3600);
/// Most payloads one delete statement removes. Keeps each statement's locks and WAL burst small
/// so retention never stalls ingest on the same tables (SPEC §3.7: at most 1,000).
pub const RETENTION_BATCH_MAX: usize = 1000;

/// Deletes at most `batch_max` (≤ [`RETENTION_BATCH_MAX`]) payloads stored before
/// `older_than`, in one statement; returns how many were deleted. Call it until it returns
/// less than `batch_max`, or use [`run_retention`].
pub async fn delete_expired_payloads<'e>(
    ex: impl PgExecutor<'e>,
    older_than: DateTime<Utc>,
    batch_max: usize,
) -> Result<u64, InboxError> {
    if batch_max == 0 || batch_max > RETENTION_BATCH_MAX {
        return Err(InboxError::invalid(
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
) -> Result<u64, InboxError> {
    let retention = chrono::Duration::from_std(retention)
        .map_err(|_| InboxError::invalid("retention", "too long"))?;
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
