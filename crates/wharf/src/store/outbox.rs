//! Outbox statements: every SQL statement the outbox runs, one `.sql` file each under
//! `sql/outbox/`, each called from one small function here.
//!
//! Owns: statement text, parameter binding and row shapes. Must not know: what a result means.
//! The callers in [`crate::outbox`] decide (with `wharf-core`) which state to write, and read the
//! returned rows; nothing here chooses a state, a delay or a stop reason.
//!
//! Every function that needs "now" takes `now: Option<DateTime<Utc>>`; `None` is the database
//! clock, which is what production uses. Tests pass a time to move the clock.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgExecutor, Row as _};
use wharf_core::action::{ActionState, StopReason};

use crate::outbox::ActionView;

/// One row to insert, with every value already validated and decided.
#[derive(Debug, Clone)]
pub struct NewActionRow {
    /// Registered kind name.
    pub kind: String,
    /// Tenant scope (NULL only for an instance-level kind).
    pub tenant_id: Option<String>,
    /// Project scope.
    pub project_id: Option<String>,
    /// Lane key.
    pub lane_key: String,
    /// Idempotency key.
    pub idempotency_key: String,
    /// SHA-256 content digest (32 bytes).
    pub content_digest: Vec<u8>,
    /// Copied from the kind.
    pub at_most_once: bool,
    /// Copied from the kind.
    pub instance_level: bool,
    /// `PROPOSED` or `ADMITTED`.
    pub state: &'static str,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// The payload.
    pub payload: Value,
    /// Subject account, for erasure.
    pub subject_account_id: Option<String>,
    /// Not due before; `None` is the database clock at insert.
    pub run_at: Option<DateTime<Utc>>,
    /// Expiry of an unstarted action.
    pub expires_at: Option<DateTime<Utc>>,
}

/// An inserted row: its id and key.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InsertedRow {
    /// New action id.
    pub id: i64,
    /// Its idempotency key.
    pub idempotency_key: String,
}

/// An existing row found by idempotency key.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KeyedRow {
    /// Action id.
    pub id: i64,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// Its content digest.
    pub content_digest: Vec<u8>,
}

/// Inserts a batch in one statement (`enqueue.sql`; one row by `enqueue_one.sql`). Rows whose
/// key exists are skipped; when any key exists with another digest, nothing is inserted.
/// Returns the inserted rows.
pub async fn insert_actions(
    conn: &mut PgConnection,
    rows: &[NewActionRow],
    notify: bool,
) -> Result<Vec<InsertedRow>, sqlx::Error> {
    if let [r] = rows {
        let inserted: Option<(i64, String, i64)> =
            sqlx::query_as(include_str!("../../sql/outbox/enqueue_one.sql"))
                .bind(r.kind.as_str())
                .bind(r.tenant_id.as_deref())
                .bind(r.project_id.as_deref())
                .bind(r.lane_key.as_str())
                .bind(r.idempotency_key.as_str())
                .bind(r.content_digest.as_slice())
                .bind(r.at_most_once)
                .bind(r.instance_level)
                .bind(r.state)
                .bind(r.max_attempts)
                .bind(&r.payload)
                .bind(r.subject_account_id.as_deref())
                .bind(r.run_at)
                .bind(r.expires_at)
                .bind(notify)
                .fetch_optional(conn)
                .await?;
        return Ok(inserted
            .map(|(id, idempotency_key, _woken)| InsertedRow {
                id,
                idempotency_key,
            })
            .into_iter()
            .collect());
    }
    let mut kind = Vec::with_capacity(rows.len());
    let mut tenant = Vec::with_capacity(rows.len());
    let mut project = Vec::with_capacity(rows.len());
    let mut lane = Vec::with_capacity(rows.len());
    let mut key = Vec::with_capacity(rows.len());
    let mut digest = Vec::with_capacity(rows.len());
    let mut amo = Vec::with_capacity(rows.len());
    let mut instance = Vec::with_capacity(rows.len());
    let mut state = Vec::with_capacity(rows.len());
    let mut max_attempts = Vec::with_capacity(rows.len());
    let mut payload = Vec::with_capacity(rows.len());
    let mut subject = Vec::with_capacity(rows.len());
    let mut run_at = Vec::with_capacity(rows.len());
    let mut expires_at = Vec::with_capacity(rows.len());
    for r in rows {
        kind.push(r.kind.as_str());
        tenant.push(r.tenant_id.as_deref());
        project.push(r.project_id.as_deref());
        lane.push(r.lane_key.as_str());
        key.push(r.idempotency_key.as_str());
        digest.push(r.content_digest.as_slice());
        amo.push(r.at_most_once);
        instance.push(r.instance_level);
        state.push(r.state);
        max_attempts.push(r.max_attempts);
        payload.push(&r.payload);
        subject.push(r.subject_account_id.as_deref());
        run_at.push(r.run_at);
        expires_at.push(r.expires_at);
    }
    sqlx::query_as(include_str!("../../sql/outbox/enqueue.sql"))
        .bind(kind)
        .bind(tenant)
        .bind(project)
        .bind(lane)
        .bind(key)
        .bind(digest)
        .bind(amo)
        .bind(instance)
        .bind(state)
        .bind(max_attempts)
        .bind(payload)
        .bind(subject)
        .bind(run_at)
        .bind(expires_at)
        .bind(notify)
        .fetch_all(conn)
        .await
        .map(|rows: Vec<(i64, String, i64)>| {
            rows.into_iter()
                .map(|(id, idempotency_key, _woken)| InsertedRow {
                    id,
                    idempotency_key,
                })
                .collect()
        })
}

/// Existing actions by idempotency key (`find_by_keys.sql`).
pub async fn find_by_keys<'c>(
    executor: impl PgExecutor<'c>,
    keys: &[&str],
) -> Result<Vec<KeyedRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/outbox/find_by_keys.sql"))
        .bind(keys)
        .fetch_all(executor)
        .await
}

/// PROPOSED -> ADMITTED (`admit.sql`). False when the action is not PROPOSED.
pub async fn admit<'c>(executor: impl PgExecutor<'c>, id: i64) -> Result<bool, sqlx::Error> {
    let row: Option<(i64,)> = sqlx::query_as(include_str!("../../sql/outbox/admit.sql"))
        .bind(id)
        .fetch_optional(executor)
        .await?;
    Ok(row.is_some())
}

/// PROPOSED -> CANCELLED / REFUSED (`refuse.sql`). The refused action's kind; `None` when the
/// action is not PROPOSED.
pub async fn refuse<'c>(
    executor: impl PgExecutor<'c>,
    id: i64,
) -> Result<Option<String>, sqlx::Error> {
    let row: Option<(i64, String)> = sqlx::query_as(include_str!("../../sql/outbox/refuse.sql"))
        .bind(id)
        .fetch_optional(executor)
        .await?;
    Ok(row.map(|(_, kind)| kind))
}

/// A whole action row, as `get.sql` and `list.sql` return it, decoded into the one public shape.
/// A state or stop reason the core does not know (a schema newer than this binary) is a decode
/// error, never a guess.
impl<'r> sqlx::FromRow<'r, PgRow> for ActionView {
    fn from_row(row: &'r PgRow) -> Result<Self, sqlx::Error> {
        let decode =
            |column: &str, e: Box<dyn std::error::Error + Send + Sync>| sqlx::Error::ColumnDecode {
                index: column.to_owned(),
                source: e,
            };
        let state: String = row.try_get("state")?;
        let stop_reason: Option<String> = row.try_get("stop_reason")?;
        let attempt: i32 = row.try_get("attempt")?;
        let max_attempts: i32 = row.try_get("max_attempts")?;
        let digest: Vec<u8> = row.try_get("content_digest")?;
        Ok(ActionView {
            id: row.try_get("id")?,
            kind: row.try_get("kind")?,
            tenant_id: row.try_get("tenant_id")?,
            project_id: row.try_get("project_id")?,
            lane_key: row.try_get("lane_key")?,
            idempotency_key: row.try_get("idempotency_key")?,
            content_digest: hex::encode(digest),
            at_most_once: row.try_get("at_most_once")?,
            instance_level: row.try_get("instance_level")?,
            state: state
                .parse::<ActionState>()
                .map_err(|e| decode("state", e.into()))?,
            stop_reason: stop_reason
                .map(|r| r.parse::<StopReason>())
                .transpose()
                .map_err(|e| decode("stop_reason", e.into()))?,
            epoch: row.try_get("epoch")?,
            attempt: u32::try_from(attempt).map_err(|e| decode("attempt", e.into()))?,
            max_attempts: u32::try_from(max_attempts)
                .map_err(|e| decode("max_attempts", e.into()))?,
            payload: row.try_get("payload")?,
            subject_account_id: row.try_get("subject_account_id")?,
            run_at: row.try_get("run_at")?,
            expires_at: row.try_get("expires_at")?,
            lease_expires_at: row.try_get("lease_expires_at")?,
            write_started_at: row.try_get("write_started_at")?,
            readback_ref: row.try_get("readback_ref")?,
            error_code: row.try_get("error_code")?,
            created_at: row.try_get("created_at")?,
            ended_at: row.try_get("ended_at")?,
        })
    }
}

/// One action by id (`get.sql`).
pub async fn get<'c>(
    executor: impl PgExecutor<'c>,
    id: i64,
) -> Result<Option<ActionView>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/outbox/get.sql"))
        .bind(id)
        .fetch_optional(executor)
        .await
}

/// A page of actions after a cursor (`list.sql`).
pub async fn list<'c>(
    executor: impl PgExecutor<'c>,
    state: Option<&str>,
    kind: Option<&str>,
    tenant_id: Option<&str>,
    after_id: Option<i64>,
    limit: u32,
) -> Result<Vec<ActionView>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/outbox/list.sql"))
        .bind(state)
        .bind(kind)
        .bind(tenant_id)
        .bind(after_id)
        .bind(i32::try_from(limit).unwrap_or(i32::MAX))
        .fetch_all(executor)
        .await
}

/// A claimed action, as `claim.sql` returns it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClaimedRow {
    pub id: i64,
    pub kind: String,
    pub tenant_id: Option<String>,
    pub project_id: Option<String>,
    pub lane_key: String,
    pub idempotency_key: String,
    pub payload: Option<Value>,
    pub subject_account_id: Option<String>,
    pub attempt: i32,
    pub max_attempts: i32,
    pub epoch: i64,
    /// When the action was enqueued.
    pub created_at: DateTime<Utc>,
    /// An earlier attempt may have written (the mark as it was before this claim).
    pub write_started: bool,
    /// This claim recorded `write_started_at` itself: its commit is the attempt's fence.
    pub claim_fenced: bool,
}

/// The session settings of the connections that run `claim.sql` (the executor's claim pool).
///
/// Planning was a fifth of a claim's server time (0.5 of 2.4 ms for 100 rows, EXPLAIN ANALYZE),
/// and claims run one after another on the drain's path, so the claim keeps one generic plan per
/// connection. A generic plan is made once, from the statistics of that moment; made while the
/// table was empty (a fresh install, a drained queue) it scanned the table and hashed the
/// result, which is what once made claims of 100 rows take 8 s. With sequential and bitmap
/// scans, sorts and hash and merge joins priced out, and no join left in the text whose order
/// the planner could choose, every choice left is the one the statement's text was written for
/// (the lease index in lease order, the due index in run_at order, the primary key for the
/// lateral look-up and for the update, the lane indexes for the probes), whatever the
/// statistics say; `tests/it/outbox/plans.rs` makes the plan on an empty table, grows the
/// table under it, and asserts that no index is walked whole.
/// Only this statement runs on such connections: the completion's plan needs its hash join.
pub const CLAIM_SESSION_OPTIONS: [(&str, &str); 7] = [
    ("plan_cache_mode", "force_generic_plan"),
    ("enable_seqscan", "off"),
    ("enable_bitmapscan", "off"),
    ("enable_sort", "off"),
    ("enable_hashjoin", "off"),
    ("enable_mergejoin", "off"),
    ("jit", "off"),
];

/// Claims due lane heads and expired leases (`claim.sql`). The executor runs it on connections
/// with [`CLAIM_SESSION_OPTIONS`].
pub async fn claim<'c>(
    executor: impl PgExecutor<'c>,
    count_max: u32,
    lease_ms: u64,
    now: Option<DateTime<Utc>>,
    kinds: &[&str],
    scan_max: u32,
    fence_kinds: &[&str],
) -> Result<Vec<ClaimedRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/outbox/claim.sql"))
        .bind(i32::try_from(count_max).unwrap_or(i32::MAX))
        .bind(i64::try_from(lease_ms).unwrap_or(i64::MAX))
        .bind(now)
        .bind(kinds)
        .bind(i32::try_from(scan_max).unwrap_or(i32::MAX))
        .bind(fence_kinds)
        .fetch_all(executor)
        .await
}

/// Per-tenant caps of one claim, for `claim_capped.sql`: parallel columns, one row per cap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantCaps {
    /// The capped kind.
    pub kinds: Vec<String>,
    /// The tenant; `None` is the cap of every unlisted tenant of the kind (exactly one per
    /// capped kind). Never empty.
    pub tenants: Vec<Option<String>>,
    /// At most this many of that tenant's lane heads (0 ⇒ none, not even looked at).
    pub rows: Vec<i32>,
}

/// Claims like [`claim`], with the heads of some kinds capped per tenant
/// (`claim_capped.sql`). Reclaims of expired leases are not capped.
///
/// Costs about twice [`claim`] (every scanned candidate is probed, not only the first heads;
/// measured in `claim_capped.sql`), still bounded by `scan_max`. The executor uses it only
/// while some kind's per-tenant caps can bind.
#[allow(clippy::too_many_arguments)]
pub async fn claim_capped<'c>(
    executor: impl PgExecutor<'c>,
    count_max: u32,
    lease_ms: u64,
    now: Option<DateTime<Utc>>,
    kinds: &[&str],
    scan_max: u32,
    caps: &TenantCaps,
    fence_kinds: &[&str],
) -> Result<Vec<ClaimedRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/outbox/claim_capped.sql"))
        .bind(i32::try_from(count_max).unwrap_or(i32::MAX))
        .bind(i64::try_from(lease_ms).unwrap_or(i64::MAX))
        .bind(now)
        .bind(kinds)
        .bind(i32::try_from(scan_max).unwrap_or(i32::MAX))
        .bind(&caps.kinds)
        .bind(&caps.tenants)
        .bind(&caps.rows)
        .bind(fence_kinds)
        .fetch_all(executor)
        .await
}

/// Demotes head hints of rows waiting behind an earlier unstarted row or a busy lane, and marks
/// their blockers (`demote.sql`). Returns how many rows were demoted.
pub async fn demote<'c>(
    executor: impl PgExecutor<'c>,
    scan_max: u32,
    now: Option<DateTime<Utc>>,
) -> Result<u64, sqlx::Error> {
    // One row per changed action: demoted, or only marked as the blocker of one.
    let changed: Vec<bool> = sqlx::query_scalar(include_str!("../../sql/outbox/demote.sql"))
        .bind(i32::try_from(scan_max).unwrap_or(i32::MAX))
        .bind(now)
        .fetch_all(executor)
        .await?;
    Ok(changed.into_iter().filter(|demoted| *demoted).count() as u64)
}

/// The fence (`begin_write.sql`) for one attempt. True when the write may start.
pub async fn begin_write<'c>(
    executor: impl PgExecutor<'c>,
    id: i64,
    epoch: i64,
    fence_margin_ms: u64,
    now: Option<DateTime<Utc>>,
) -> Result<bool, sqlx::Error> {
    let passed = begin_write_many(executor, &[id], &[epoch], fence_margin_ms, now).await?;
    Ok(!passed.is_empty())
}

/// The fence (`begin_write.sql`) for many attempts in one statement: the ids that may start
/// their write. `ids` and `epochs` pair up by position.
pub async fn begin_write_many<'c>(
    executor: impl PgExecutor<'c>,
    ids: &[i64],
    epochs: &[i64],
    fence_margin_ms: u64,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../../sql/outbox/begin_write.sql"))
        .bind(ids)
        .bind(epochs)
        .bind(i64::try_from(fence_margin_ms).unwrap_or(i64::MAX))
        .bind(now)
        .fetch_all(executor)
        .await
}

/// What the fence saw when it refused (`fence_state.sql`): epoch, state, lease left in ms.
pub async fn fence_state<'c>(
    executor: impl PgExecutor<'c>,
    id: i64,
    now: Option<DateTime<Utc>>,
) -> Result<Option<(i64, String, Option<i64>)>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/outbox/fence_state.sql"))
        .bind(id)
        .bind(now)
        .fetch_optional(executor)
        .await
}

/// One attempt's decided follow-up, for `complete.sql`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRow {
    /// Action id.
    pub id: i64,
    /// The claim's epoch (the fence).
    pub epoch: i64,
    /// What becomes of the action.
    pub next: Next,
    /// Provider reference of a Done.
    pub readback_ref: Option<String>,
    /// Stable error code.
    pub error_code: Option<String>,
    /// Clear `write_started_at` (the adapter proved nothing was written).
    pub clear_fence: bool,
}

/// What a completion does to its action: back to waiting, or ended for a reason (the reason
/// names the ended state, so a row cannot carry a state and a reason that disagree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// `ADMITTED` again, due after `delay_ms`, with `refund` attempts given back (1 for a
    /// deferral, which does not count as an attempt).
    Again {
        /// Delay before the next attempt.
        delay_ms: i64,
        /// Attempts given back.
        refund: i32,
    },
    /// Ended in the state of its reason ([`StopReason::state`]).
    Ended(StopReason),
}

impl Next {
    /// The state the action moves to.
    pub fn state(self) -> ActionState {
        match self {
            Next::Again { .. } => ActionState::Admitted,
            Next::Ended(reason) => reason.state(),
        }
    }

    /// The stop reason, exactly when the action ends.
    pub fn stop_reason(self) -> Option<StopReason> {
        match self {
            Next::Again { .. } => None,
            Next::Ended(reason) => Some(reason),
        }
    }
    /// The delay before the next attempt and the attempts given back: both 0 when it ends.
    pub fn delay_and_refund(self) -> (i64, i32) {
        match self {
            Next::Again { delay_ms, refund } => (delay_ms, refund),
            Next::Ended(_) => (0, 0),
        }
    }
}

/// Records many results in one statement (`complete.sql`). Returns the ids that were recorded;
/// the others lost their claim.
pub async fn complete<'c>(
    executor: impl PgExecutor<'c>,
    rows: &[CompletionRow],
    now: Option<DateTime<Utc>>,
) -> Result<Vec<i64>, sqlx::Error> {
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let epochs: Vec<i64> = rows.iter().map(|r| r.epoch).collect();
    let states: Vec<&str> = rows.iter().map(|r| r.next.state().as_str()).collect();
    let reasons: Vec<Option<&str>> = rows
        .iter()
        .map(|r| r.next.stop_reason().map(StopReason::as_str))
        .collect();
    let refs: Vec<Option<&str>> = rows.iter().map(|r| r.readback_ref.as_deref()).collect();
    let codes: Vec<Option<&str>> = rows.iter().map(|r| r.error_code.as_deref()).collect();
    let (delays, refunds): (Vec<i64>, Vec<i32>) =
        rows.iter().map(|r| r.next.delay_and_refund()).unzip();
    let clears: Vec<bool> = rows.iter().map(|r| r.clear_fence).collect();
    sqlx::query_scalar(include_str!("../../sql/outbox/complete.sql"))
        .bind(ids)
        .bind(epochs)
        .bind(states)
        .bind(reasons)
        .bind(refs)
        .bind(codes)
        .bind(delays)
        .bind(refunds)
        .bind(clears)
        .bind(now)
        .fetch_all(executor)
        .await
}

/// Gives claimed, unstarted actions back without counting an attempt (`release.sql`).
pub async fn release<'c>(
    executor: impl PgExecutor<'c>,
    ids: &[i64],
    epochs: &[i64],
    clear_fence: &[bool],
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../../sql/outbox/release.sql"))
        .bind(ids)
        .bind(epochs)
        .bind(clear_fence)
        .fetch_all(executor)
        .await
}

/// Ends actions whose lease expired and that may not be claimed again: at-most-once actions
/// whose write started, and actions whose last attempt lost its lease (`sweep_lease_lost.sql`).
/// Returns (id, kind, stop reason) of each.
pub async fn sweep_lease_lost<'c>(
    executor: impl PgExecutor<'c>,
    batch_max: u32,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<(i64, String, String)>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/outbox/sweep_lease_lost.sql"))
        .bind(i32::try_from(batch_max).unwrap_or(i32::MAX))
        .bind(now)
        .fetch_all(executor)
        .await
}

/// Ends unstarted actions past `expires_at` (`sweep_expired.sql`). Returns (id, kind) of each.
pub async fn sweep_expired<'c>(
    executor: impl PgExecutor<'c>,
    batch_max: u32,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<(i64, String)>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/outbox/sweep_expired.sql"))
        .bind(i32::try_from(batch_max).unwrap_or(i32::MAX))
        .bind(now)
        .fetch_all(executor)
        .await
}

/// Makes every waiting ADMITTED action due now (`make_due.sql`). Returns how many moved.
pub async fn make_due<'c>(
    executor: impl PgExecutor<'c>,
    now: Option<DateTime<Utc>>,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(include_str!("../../sql/outbox/make_due.sql"))
        .bind(now)
        .execute(executor)
        .await?;
    Ok(done.rows_affected())
}

/// Deletes every action of a subject, live then ended, each with its key row
/// (`erase_subject.sql`, then `erase_subject_ended.sql`: two statements, so that an action a
/// completion moved while the first waited is seen by the second). Returns how many.
pub async fn erase_subject(
    conn: &mut PgConnection,
    subject_account_id: &str,
) -> Result<u64, sqlx::Error> {
    let live: i64 = sqlx::query_scalar(include_str!("../../sql/outbox/erase_subject.sql"))
        .bind(subject_account_id)
        .fetch_one(&mut *conn)
        .await?;
    let ended: i64 = sqlx::query_scalar(include_str!("../../sql/outbox/erase_subject_ended.sql"))
        .bind(subject_account_id)
        .fetch_one(&mut *conn)
        .await?;
    Ok(u64::try_from(live + ended).unwrap_or(0))
}

/// Deletes at most `batch_max` actions that ended before `cutoff`, with their key rows
/// (`delete_ended.sql`). Returns how many actions.
pub async fn delete_ended<'c>(
    executor: impl PgExecutor<'c>,
    cutoff: DateTime<Utc>,
    batch_max: u32,
) -> Result<u64, sqlx::Error> {
    let deleted: i64 = sqlx::query_scalar(include_str!("../../sql/outbox/delete_ended.sql"))
        .bind(cutoff)
        .bind(i32::try_from(batch_max).unwrap_or(i32::MAX))
        .fetch_one(executor)
        .await?;
    Ok(u64::try_from(deleted).unwrap_or(0))
}

/// Due depth and oldest due age (seconds) per kind (`due_gauges.sql`).
pub async fn due_gauges<'c>(
    executor: impl PgExecutor<'c>,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<(String, i64, f64)>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/outbox/due_gauges.sql"))
        .bind(now)
        .fetch_all(executor)
        .await
}

/// Dead row versions in the live table since its last vacuum, its live rows, and whether this
/// role may vacuum it (`live_dead_rows.sql`).
pub async fn live_dead_rows<'c>(
    executor: impl PgExecutor<'c>,
) -> Result<(i64, i64, bool), sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/outbox/live_dead_rows.sql"))
        .fetch_one(executor)
        .await
}

/// Vacuums the live table, skipping it if another vacuum holds it (`vacuum_live.sql`). The
/// connection's own: VACUUM cannot run in a transaction, and the skip's warning is silenced on
/// it for the statement (an autovacuum holding the table is normal, not worth a log line).
pub async fn vacuum_live(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::raw_sql("SET client_min_messages = error")
        .execute(&mut *conn)
        .await?;
    let vacuumed = sqlx::raw_sql(include_str!("../../sql/outbox/vacuum_live.sql"))
        .execute(&mut *conn)
        .await;
    sqlx::raw_sql("RESET client_min_messages")
        .execute(&mut *conn)
        .await?;
    vacuumed.map(|_| ())
}
