//! Stream statements of the inbox (`sql/inbox/stream_*.sql`): the per-stream lock, the cursor
//! and replay floor an operator moves, and the bounded stream list.
//!
//! Owns: statement text and row shapes, as the rest of [`super`]. Must not know: what a cursor
//! move means for the next envelope (`wharf_core::inbox` decides).

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, Row};

use super::{StreamKey, seq};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamRow {
    /// The stream's id.
    pub stream_id: i64,
    /// The contiguous cursor.
    pub acknowledged_sequence: u64,
    /// The replay floor.
    pub replay_floor: u64,
}

/// A stream as shown to an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamListRow {
    /// The stream's id.
    pub stream_id: i64,
    /// Its tenant.
    pub tenant_id: String,
    /// Its project.
    pub project_id: String,
    /// `device` or `account`.
    pub producer_kind: String,
    /// The device or account id.
    pub producer_id: String,
    /// The contiguous cursor.
    pub acknowledged_sequence: u64,
    /// The replay floor.
    pub replay_floor: u64,
    /// Accepted identities beyond the cursor (waiting for a gap to close).
    pub retained_ahead: i64,
    /// When the stream first appeared.
    pub created_at: DateTime<Utc>,
    /// When its cursor or floor last moved.
    pub updated_at: DateTime<Utc>,
}

/// `stream_lock.sql`: the stream's row, locked until the transaction ends; `None` when missing.
pub async fn stream_lock<'e>(
    ex: impl PgExecutor<'e>,
    key: StreamKey<'_>,
) -> Result<Option<StreamRow>, sqlx::Error> {
    let row = sqlx::query(include_str!("../../../sql/inbox/stream_lock.sql"))
        .bind(key.tenant_id)
        .bind(key.project_id)
        .bind(key.producer_kind)
        .bind(key.producer_id)
        .fetch_optional(ex)
        .await?;
    row.map(|r| {
        Ok(StreamRow {
            stream_id: r.try_get(0)?,
            acknowledged_sequence: seq(r.try_get(1)?)?,
            replay_floor: seq(r.try_get(2)?)?,
        })
    })
    .transpose()
}

/// `stream_ahead.sql`: retained sequences in `cursor+1 ..= cursor+rows_max`, ascending.
pub async fn stream_ahead<'e>(
    ex: impl PgExecutor<'e>,
    stream_id: i64,
    cursor: u64,
    rows_max: i64,
) -> Result<Vec<u64>, sqlx::Error> {
    let rows: Vec<String> = sqlx::query_scalar(include_str!("../../../sql/inbox/stream_ahead.sql"))
        .bind(stream_id)
        .bind(cursor.to_string())
        .bind(rows_max)
        .fetch_all(ex)
        .await?;
    rows.iter().map(|text| seq(text)).collect()
}

/// `stream_set_cursor.sql`.
pub async fn stream_set_cursor<'e>(
    ex: impl PgExecutor<'e>,
    stream_id: i64,
    acknowledged_sequence: u64,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../../sql/inbox/stream_set_cursor.sql"))
        .bind(stream_id)
        .bind(acknowledged_sequence.to_string())
        .execute(ex)
        .await?;
    Ok(())
}

/// `stream_set_floor.sql`.
pub async fn stream_set_floor<'e>(
    ex: impl PgExecutor<'e>,
    stream_id: i64,
    replay_floor: u64,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../../sql/inbox/stream_set_floor.sql"))
        .bind(stream_id)
        .bind(replay_floor.to_string())
        .execute(ex)
        .await?;
    Ok(())
}

/// `stream_list.sql`: streams of a project, one producer's when `producer` is given.
pub async fn stream_list<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    producer: Option<(&str, &str)>,
    rows_max: i64,
) -> Result<Vec<StreamListRow>, sqlx::Error> {
    let rows = sqlx::query(include_str!("../../../sql/inbox/stream_list.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .bind(producer.map(|p| p.0))
        .bind(producer.map(|p| p.1))
        .bind(rows_max)
        .fetch_all(ex)
        .await?;
    rows.into_iter()
        .map(|r| {
            Ok(StreamListRow {
                stream_id: r.try_get(0)?,
                tenant_id: r.try_get(1)?,
                project_id: r.try_get(2)?,
                producer_kind: r.try_get(3)?,
                producer_id: r.try_get(4)?,
                acknowledged_sequence: seq(r.try_get(5)?)?,
                replay_floor: seq(r.try_get(6)?)?,
                created_at: r.try_get(7)?,
                updated_at: r.try_get(8)?,
                retained_ahead: r.try_get(9)?,
            })
        })
        .collect()
}
