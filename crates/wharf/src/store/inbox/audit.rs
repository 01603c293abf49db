//! Audit statements of the inbox (`sql/inbox/audit_insert*.sql`): one row per authenticated
//! decision, and the operator's stream actions.
//!
//! Owns: statement text and row shapes, as the rest of [`super`]. Must not know: which outcome
//! or reason applies (the caller passes what was decided).

use sqlx::PgExecutor;

use super::{StreamKey, seq};

/// Who an ingest audit batch is about: the same for every row of one request.
#[derive(Debug, Clone, Copy)]
pub struct AuditScope<'a> {
    /// The verified tenant.
    pub tenant_id: &'a str,
    /// The route's project, when it is a valid identity.
    pub project_id: Option<&'a str>,
    /// The verified account.
    pub actor_account: &'a str,
    /// The verified device.
    pub actor_device: Option<&'a str>,
    /// `device` or `account`.
    pub producer_kind: &'a str,
    /// The producer id.
    pub producer_id: &'a str,
}

/// Audit columns, one element per decision (see `audit_insert.sql`).
#[derive(Debug, Default, Clone)]
pub struct AuditBatch {
    /// SHA-256 hex of the event id, when the envelope got far enough to have one.
    pub event_id_sha256: Vec<Option<String>>,
    /// The sequence, when known.
    pub producer_sequence: Vec<Option<u64>>,
    /// The outcome.
    pub outcome: Vec<&'static str>,
    /// The stable reason.
    pub reason: Vec<&'static str>,
    /// The request's correlation id.
    pub correlation_id: Vec<String>,
}

/// One operator action on a stream, for the audit.
#[derive(Debug, Clone, Copy)]
pub struct OperatorAudit<'a> {
    /// `stream-skip` or `stream-advance-floor`.
    pub action: &'static str,
    /// The stream.
    pub stream: StreamKey<'a>,
    /// Who did it.
    pub operator: &'a str,
    /// Cursor or floor before.
    pub before: u64,
    /// Cursor or floor after.
    pub after: u64,
    /// Why (operator's stable reason text).
    pub reason: &'a str,
    /// The action's correlation id.
    pub correlation_id: &'a str,
}

/// `audit_insert.sql`: appends ingest audit rows when `credential_id` is still live; returns
/// whether it was, and the stream's cursor as this statement sees it (0 when the stream does
/// not exist).
pub async fn audit_insert<'e>(
    ex: impl PgExecutor<'e>,
    scope: AuditScope<'_>,
    batch: &AuditBatch,
    credential_id: i64,
) -> Result<(bool, u64), sqlx::Error> {
    let sequences: Vec<Option<String>> = batch
        .producer_sequence
        .iter()
        .map(|s| s.map(|s| s.to_string()))
        .collect();
    let (live, text): (bool, String) =
        sqlx::query_as(include_str!("../../../sql/inbox/audit_insert.sql"))
            .bind(scope.tenant_id)
            .bind(scope.project_id)
            .bind(scope.actor_account)
            .bind(scope.actor_device)
            .bind(scope.producer_kind)
            .bind(scope.producer_id)
            .bind(&batch.event_id_sha256)
            .bind(&sequences)
            .bind(&batch.outcome)
            .bind(&batch.reason)
            .bind(&batch.correlation_id)
            .bind(credential_id)
            .fetch_one(ex)
            .await?;
    Ok((live, seq(&text)?))
}

/// `audit_insert_operator.sql`: appends one operator-action audit row.
pub async fn audit_insert_operator<'e>(
    ex: impl PgExecutor<'e>,
    audit: OperatorAudit<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../../sql/inbox/audit_insert_operator.sql"))
        .bind(audit.action)
        .bind(audit.stream.tenant_id)
        .bind(audit.stream.project_id)
        .bind(audit.operator)
        .bind(audit.stream.producer_kind)
        .bind(audit.stream.producer_id)
        .bind(audit.before.to_string())
        .bind(audit.after.to_string())
        .bind(audit.reason)
        .bind(audit.correlation_id)
        .execute(ex)
        .await?;
    Ok(())
}
