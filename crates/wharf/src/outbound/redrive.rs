//! Redrive: dead letters of the `envelope` kind delivered again, byte for byte.
//!
//! An emitted envelope is kept immutably (`wharf.outbound_envelopes`), so its dead letter can be
//! sent again with the same bytes and the same event id: the receiver deduplicates, so a
//! delivery that did arrive after all is answered `ignore-duplicate`, never applied twice. Each
//! redriven dead letter becomes a new action of the same kind, scope and lane under the
//! outbox's resend key, linked to the original (`wharf.action_resend`) and audited.
//!
//! Always for one explicit tenant and project (optionally one error code, ended after a time),
//! in emission order, at most [`REDRIVE_BATCH_MAX`] per call; a dry run returns what would be
//! redriven and writes nothing. Idempotent: a dead letter that has a resend is not picked again,
//! and its resend key would make it the same action anyway.
//!
//! Owns: which dead letters qualify. Must not know: HTTP or the CLI.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use sqlx::{Acquire, PgConnection};

use super::emit::ENVELOPE_KIND;
use super::error::Error;
use super::scope::check_scope;
use crate::outbox::{self, ActionRequest, Operator, Registry};
use crate::store;

/// Most dead letters one [`redrive`] call takes.
pub const REDRIVE_BATCH_MAX: u32 = 100;

/// Which dead letters to redrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedriveFilter {
    /// The tenant (required: never across tenants).
    pub tenant: String,
    /// The project (required).
    pub project: String,
    /// Only dead letters with this error code.
    pub error_code: Option<String>,
    /// Only dead letters that ended after this time.
    pub ended_after: Option<DateTime<Utc>>,
    /// At most this many, 1..=[`REDRIVE_BATCH_MAX`].
    pub limit: u32,
}

/// One dead letter a redrive took (or, in a dry run, would take).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Redriven {
    /// The dead letter.
    pub original_id: i64,
    /// Its error code.
    pub error_code: Option<String>,
    /// The envelope's event id (the receiver deduplicates on it).
    pub event_id: String,
    /// The new delivery action; `None` in a dry run.
    pub action_id: Option<i64>,
}

/// Redrives (or, with `dry_run`, lists) up to `filter.limit` envelope dead letters of one
/// scope, in emission order, in the caller's transaction (a savepoint of it), one audit row
/// each. Call again until it returns fewer than the limit.
pub async fn redrive(
    conn: &mut PgConnection,
    registry: &Registry,
    op: &Operator,
    filter: &RedriveFilter,
    dry_run: bool,
) -> Result<Vec<Redriven>, Error> {
    op.check()?;
    check_scope(&filter.tenant, &filter.project)?;
    if !(1..=REDRIVE_BATCH_MAX).contains(&filter.limit) {
        return Err(Error::Invalid {
            field: "limit",
            rule: format!("must be 1..={REDRIVE_BATCH_MAX}"),
        });
    }
    if let Some(code) = &filter.error_code {
        outbox::ErrorCode::new(code).map_err(|_| Error::Invalid {
            field: "error_code",
            rule: "1..=64 bytes of a-z 0-9 _ . -".into(),
        })?;
    }
    let mut tx = conn.begin().await?;
    let rows = store::operator::redrive_candidates(
        &mut *tx,
        &filter.tenant,
        &filter.project,
        filter.error_code.as_deref(),
        filter.ended_after,
        filter.limit,
    )
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let mut action_id = None;
        if !dry_run {
            let envelope: Value = serde_json::from_str(&row.envelope)
                .map_err(|e| Error::Corrupt(format!("stored envelope {}: {e}", row.event_id)))?;
            let payload = json!({"destination_url": row.destination_url, "envelope": envelope});
            let mut req = ActionRequest::new(
                ENVELOPE_KIND,
                row.lane_key.clone(),
                outbox::resend_key(row.id),
                payload,
            )
            .tenant(filter.tenant.clone());
            req.project_id = Some(filter.project.clone());
            req.max_attempts = u32::try_from(row.max_attempts).ok();
            let enqueued = outbox::enqueue(&mut tx, registry, req).await?;
            store::operator::resend_link(&mut *tx, enqueued.id, row.id).await?;
            let detail = json!({"kind": ENVELOPE_KIND, "event_id": row.event_id,
                                "error_code": row.error_code, "resent_action_id": enqueued.id});
            store::operator::audit_insert(
                &mut *tx,
                "redrive",
                Some(row.id),
                &op.actor,
                &detail,
                &op.correlation_id,
            )
            .await?;
            action_id = Some(enqueued.id);
        }
        out.push(Redriven {
            original_id: row.id,
            error_code: row.error_code,
            event_id: row.event_id,
            action_id,
        });
    }
    tx.commit().await?;
    Ok(out)
}
