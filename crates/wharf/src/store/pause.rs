//! Paused-kind statements (`sql/pause/`): pausing, resuming and listing.
//!
//! Owns: statement text, parameter binding and row shapes. Must not know: who may pause what;
//! [`crate::outbox`] decides that and calls these.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

/// One pause in force.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PauseRow {
    pub kind: String,
    pub tenant_id: Option<String>,
    pub note: String,
    pub actor: String,
    pub correlation_id: String,
    pub paused_at: DateTime<Utc>,
    /// Whether this statement wrote it (false: it was in force already, or it was removed).
    pub created: bool,
}

/// Takes the lock that serializes pauses and resumes until the transaction ends (`lock.sql`).
pub async fn lock<'c>(executor: impl PgExecutor<'c>) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../sql/pause/lock.sql"))
        .execute(executor)
        .await
        .map(|_| ())
}

/// How many pauses are in force (`count.sql`).
pub async fn count<'c>(executor: impl PgExecutor<'c>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(include_str!("../../sql/pause/count.sql"))
        .fetch_one(executor)
        .await
}

/// Pauses `kind` (for `tenant`, or every tenant) unless it is already (`insert.sql`). `None`
/// only when a concurrent pause of the same committed between this statement's snapshot and
/// its insert.
pub async fn insert<'c>(
    executor: impl PgExecutor<'c>,
    kind: &str,
    tenant: Option<&str>,
    note: &str,
    actor: &str,
    correlation_id: &str,
) -> Result<Option<PauseRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/pause/insert.sql"))
        .bind(kind)
        .bind(tenant)
        .bind(note)
        .bind(actor)
        .bind(correlation_id)
        .fetch_optional(executor)
        .await
}

/// Ends the pause of `kind` (for `tenant`, or the kind-wide one) (`delete.sql`). `None`: there
/// was none.
pub async fn delete<'c>(
    executor: impl PgExecutor<'c>,
    kind: &str,
    tenant: Option<&str>,
) -> Result<Option<PauseRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/pause/delete.sql"))
        .bind(kind)
        .bind(tenant)
        .fetch_optional(executor)
        .await
}

/// Every pause in force (`list.sql`).
pub async fn list<'c>(executor: impl PgExecutor<'c>) -> Result<Vec<PauseRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/pause/list.sql"))
        .fetch_all(executor)
        .await
}
