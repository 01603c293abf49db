//! Stream administration: show streams, and the two audited operator actions that move a stream
//! by hand — skip a gap (move the cursor forward) and advance the replay floor (SPEC §3.5).
//!
//! Owns: the rules for those actions (a skip only moves forward; a floor only rises and never
//! past the cursor + 1, so it can never refuse a sequence that was neither acknowledged nor
//! skipped). Must not know ingest: it shares only the stream row and its lock with it, so an
//! operator action and an ingest on one stream are serialised by the same `FOR UPDATE`.

use sqlx::PgConnection;
use wharf_core::inbox::advance_cursor;

use super::error::Error;
use crate::core::envelope::is_identity;
use crate::store::inbox::{self as store, OperatorAudit, StreamKey};

/// Most streams one `show` returns. A project with more producers is listed by producer.
pub const STREAMS_SHOWN_MAX: i64 = 1000;
/// Most retained sequences one read of the cursor walk fetches. A walk longer than this (a gap
/// closing after more than 10,000 retained envelopes) reads again, so memory stays bounded.
pub const CURSOR_WALK_ROWS_MAX: i64 = 10_000;
/// Longest operator reason recorded in the audit.
pub const OPERATOR_REASON_BYTES_MAX: usize = 256;

/// A stream as shown to an operator.
pub type StreamInfo = store::StreamListRow;

/// Who produces a stream: a device, or an account whose credentials name no device.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Producer {
    /// A device id.
    Device(String),
    /// An account id.
    Account(String),
}

impl Producer {
    /// `device` or `account`, as stored.
    pub fn kind(&self) -> &'static str {
        match self {
            Producer::Device(_) => "device",
            Producer::Account(_) => "account",
        }
    }

    /// The device or account id.
    pub fn id(&self) -> &str {
        match self {
            Producer::Device(id) | Producer::Account(id) => id,
        }
    }
}

/// One stream: (tenant, project, producer).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StreamId {
    /// The tenant.
    pub tenant: String,
    /// The project.
    pub project: String,
    /// The producer.
    pub producer: Producer,
}

impl StreamId {
    fn key(&self) -> StreamKey<'_> {
        StreamKey {
            tenant_id: &self.tenant,
            project_id: &self.project,
            producer_kind: self.producer.kind(),
            producer_id: self.producer.id(),
        }
    }
}

/// What an operator action changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamChange {
    /// The cursor or floor before.
    pub before: u64,
    /// The cursor or floor after (a skip also walks through retained sequences beyond its
    /// target, so this may exceed the target).
    pub after: u64,
}

pub(crate) fn check_operator(operator: &str, reason: &str) -> Result<(), Error> {
    if !is_identity(operator) {
        return Err(Error::invalid(
            "operator",
            "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
        ));
    }
    if reason.is_empty()
        || reason.len() > OPERATOR_REASON_BYTES_MAX
        || reason.chars().any(char::is_control)
    {
        return Err(Error::invalid(
            "reason",
            format!("must be 1..={OPERATOR_REASON_BYTES_MAX} bytes without control characters"),
        ));
    }
    Ok(())
}

fn correlation_id() -> String {
    super::new_correlation_id()
}

/// Where a locked stream's cursor gets to from `cursor` through every retained sequence now
/// contiguous with it. The rule is `wharf_core::inbox::advance_cursor`; this only feeds it
/// bounded reads. Stores nothing: the caller sets the cursor it decided on.
pub(crate) async fn walk_cursor(
    conn: &mut PgConnection,
    stream_id: i64,
    cursor: u64,
) -> Result<u64, sqlx::Error> {
    let mut walked = cursor;
    loop {
        let ahead =
            store::stream_ahead(&mut *conn, stream_id, walked, CURSOR_WALK_ROWS_MAX).await?;
        let next = advance_cursor(walked, &ahead);
        // Read again only when the whole read was contiguous: the run may continue beyond it.
        let again = ahead.len() as i64 == CURSOR_WALK_ROWS_MAX && ahead.last() == Some(&next);
        walked = next;
        if !again {
            return Ok(walked);
        }
    }
}

/// The streams of (tenant, project), or only `producer`'s.
pub async fn show(
    conn: &mut PgConnection,
    tenant: &str,
    project: &str,
    producer: Option<&Producer>,
) -> Result<Vec<StreamInfo>, Error> {
    Ok(store::stream_list(
        conn,
        tenant,
        project,
        producer.map(|p| (p.kind(), p.id())),
        STREAMS_SHOWN_MAX,
    )
    .await?)
}

/// Operator skip: moves the stream's cursor forward to `to` (past a gap the producer will never
/// fill), then through every retained sequence contiguous with it. Sequences at or below the
/// new cursor that were never received can still arrive and are then `accept-reordered`, until
/// the floor passes them. Audited with `operator` and `reason`. Runs in the caller's
/// transaction; commit it to make the skip take effect.
pub async fn skip(
    conn: &mut PgConnection,
    stream: &StreamId,
    to: u64,
    operator: &str,
    reason: &str,
) -> Result<StreamChange, Error> {
    check_operator(operator, reason)?;
    let key = stream.key();
    let row = store::stream_lock(&mut *conn, key)
        .await?
        .ok_or(Error::NotFound { what: "stream" })?;
    if to <= row.acknowledged_sequence {
        return Err(Error::Conflict(format!(
            "skip target {to} is not ahead of the cursor {}",
            row.acknowledged_sequence
        )));
    }
    let after = walk_cursor(&mut *conn, row.stream_id, to).await?;
    store::stream_set_cursor(&mut *conn, row.stream_id, after).await?;
    store::audit_insert_operator(
        &mut *conn,
        OperatorAudit {
            action: "stream-skip",
            stream: key,
            operator,
            before: row.acknowledged_sequence,
            after,
            reason,
            correlation_id: &correlation_id(),
        },
    )
    .await?;
    Ok(StreamChange {
        before: row.acknowledged_sequence,
        after,
    })
}

/// Operator advance-floor: raises the stream's replay floor to `floor`. New envelopes below it
/// are then refused as replays (duplicates of retained ones still answer `ignore-duplicate`).
/// The floor may not pass the cursor + 1; skip a gap first. Audited; runs in the caller's
/// transaction.
pub async fn advance_floor(
    conn: &mut PgConnection,
    stream: &StreamId,
    floor: u64,
    operator: &str,
    reason: &str,
) -> Result<StreamChange, Error> {
    check_operator(operator, reason)?;
    let key = stream.key();
    let row = store::stream_lock(&mut *conn, key)
        .await?
        .ok_or(Error::NotFound { what: "stream" })?;
    if floor <= row.replay_floor {
        return Err(Error::Conflict(format!(
            "floor {floor} does not raise the current floor {}",
            row.replay_floor
        )));
    }
    if floor > row.acknowledged_sequence.saturating_add(1) {
        return Err(Error::Conflict(format!(
            "floor {floor} would pass the cursor {} (skip the gap first)",
            row.acknowledged_sequence
        )));
    }
    store::stream_set_floor(&mut *conn, row.stream_id, floor).await?;
    store::audit_insert_operator(
        &mut *conn,
        OperatorAudit {
            action: "stream-advance-floor",
            stream: key,
            operator,
            before: row.replay_floor,
            after: floor,
            reason,
            correlation_id: &correlation_id(),
        },
    )
    .await?;
    Ok(StreamChange {
        before: row.replay_floor,
        after: floor,
    })
}
