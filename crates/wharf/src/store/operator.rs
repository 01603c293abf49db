//! Operator-action statements (`sql/operator/`): locking an action for a decision, cancelling
//! it, and the append-only audit, resolution and resend-link rows.
//!
//! Owns: statement text, parameter binding and row shapes. Must not know: when an operator
//! action is allowed; [`crate::outbox`] decides that and calls these.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor};

/// An action as an operator decision needs it, read under a row lock.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LockedAction {
    pub id: i64,
    pub kind: String,
    pub state: String,
    pub tenant_id: Option<String>,
    pub project_id: Option<String>,
    pub lane_key: String,
    pub subject_account_id: Option<String>,
}

/// Locks one action until the transaction ends (`action_lock.sql`). `None`: no such action.
///
/// Asked twice when the first finds nothing: an action that a completion or a sweep moved to
/// the ended table while the statement waited for its live row is seen only by the next
/// statement's snapshot (under READ COMMITTED).
pub async fn lock_action(
    conn: &mut PgConnection,
    id: i64,
) -> Result<Option<LockedAction>, sqlx::Error> {
    for _ in 0..2 {
        let found = sqlx::query_as(include_str!("../../sql/operator/action_lock.sql"))
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// PROPOSED/ADMITTED -> CANCELLED / OPERATOR (`cancel.sql`). False when it was in neither.
pub async fn cancel<'c>(executor: impl PgExecutor<'c>, id: i64) -> Result<bool, sqlx::Error> {
    let row: Option<(i64,)> = sqlx::query_as(include_str!("../../sql/operator/cancel.sql"))
        .bind(id)
        .fetch_optional(executor)
        .await?;
    Ok(row.is_some())
}

/// Appends one audit row (`audit_insert.sql`); returns its id.
pub async fn audit_insert<'c>(
    executor: impl PgExecutor<'c>,
    operation: &str,
    action_id: Option<i64>,
    actor: &str,
    detail: &Value,
    correlation_id: &str,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(include_str!("../../sql/operator/audit_insert.sql"))
        .bind(operation)
        .bind(action_id)
        .bind(actor)
        .bind(detail)
        .bind(correlation_id)
        .fetch_one(executor)
        .await
}

/// One audit row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AuditRow {
    pub audit_id: i64,
    pub operation: String,
    pub action_id: Option<i64>,
    pub actor: String,
    pub role: Option<String>,
    pub target: Option<String>,
    pub detail: Value,
    pub correlation_id: String,
    pub recorded_at: DateTime<Utc>,
}

/// A page of the audit (`audit_list.sql`).
pub async fn audit_list<'c>(
    executor: impl PgExecutor<'c>,
    action_id: Option<i64>,
    after_id: Option<i64>,
    limit: u32,
) -> Result<Vec<AuditRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/operator/audit_list.sql"))
        .bind(action_id)
        .bind(after_id)
        .bind(i64::from(limit))
        .fetch_all(executor)
        .await
}

/// One resolution row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ResolutionRow {
    pub resolution_id: i64,
    pub action_id: i64,
    pub finding: String,
    pub note: String,
    pub actor: String,
    pub resent_action_id: Option<i64>,
    pub correlation_id: String,
    pub recorded_at: DateTime<Utc>,
}

/// Appends one resolution (`resolution_insert.sql`).
pub async fn resolution_insert<'c>(
    executor: impl PgExecutor<'c>,
    action_id: i64,
    finding: &str,
    note: &str,
    actor: &str,
    resent_action_id: Option<i64>,
    correlation_id: &str,
) -> Result<ResolutionRow, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/operator/resolution_insert.sql"))
        .bind(action_id)
        .bind(finding)
        .bind(note)
        .bind(actor)
        .bind(resent_action_id)
        .bind(correlation_id)
        .fetch_one(executor)
        .await
}

/// Every resolution of one action, oldest first (`resolution_list.sql`).
pub async fn resolution_list<'c>(
    executor: impl PgExecutor<'c>,
    action_id: i64,
) -> Result<Vec<ResolutionRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/operator/resolution_list.sql"))
        .bind(action_id)
        .fetch_all(executor)
        .await
}

/// Links a resend to its original (`resend_link.sql`); a repeated link is a no-op.
pub async fn resend_link<'c>(
    executor: impl PgExecutor<'c>,
    action_id: i64,
    resends_id: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../sql/operator/resend_link.sql"))
        .bind(action_id)
        .bind(resends_id)
        .execute(executor)
        .await
        .map(|_| ())
}

/// The action a resend stands in for (`resend_of.sql`).
pub async fn resend_of<'c>(
    executor: impl PgExecutor<'c>,
    action_id: i64,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../../sql/operator/resend_of.sql"))
        .bind(action_id)
        .fetch_optional(executor)
        .await
}

/// A dead letter of the `envelope` kind with its envelope (`redrive_candidates.sql`).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RedriveRow {
    pub id: i64,
    pub lane_key: String,
    pub max_attempts: i32,
    pub error_code: Option<String>,
    pub destination_url: String,
    pub envelope: String,
    pub event_id: String,
}

/// Envelope dead letters of one scope not redriven yet, in emission order, locked.
pub async fn redrive_candidates<'c>(
    executor: impl PgExecutor<'c>,
    tenant: &str,
    project: &str,
    error_code: Option<&str>,
    ended_after: Option<DateTime<Utc>>,
    limit: u32,
) -> Result<Vec<RedriveRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/operator/redrive_candidates.sql"))
        .bind(tenant)
        .bind(project)
        .bind(error_code)
        .bind(ended_after)
        .bind(i64::from(limit))
        .fetch_all(executor)
        .await
}
