//! Console statements: one `.sql` file under `sql/console/` each, one small function each.
//!
//! Owns: the SQL text of the console's sessions, its operator audit and its read model, and the
//! rows they return. Every read here is bounded by a row count its caller passes (the
//! [`crate::console`] module fixes those bounds), so no page's cost grows with a table.
//!
//! Must not know: HTTP, cookies, roles' meaning, or how a page looks.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

/// A session row (see `session_get.sql`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SessionRow {
    /// Who signed in.
    pub operator: String,
    /// `operator` or `read-only`.
    pub role: String,
    /// When the session began.
    pub created_at: DateTime<Utc>,
    /// When it ends.
    pub expires_at: DateTime<Utc>,
}

/// `session_insert.sql`.
pub async fn session_insert<'e>(
    ex: impl PgExecutor<'e>,
    sha256: &[u8],
    operator: &str,
    role: &str,
    lifetime_ms: i64,
) -> Result<SessionRow, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/session_insert.sql"))
        .bind(sha256)
        .bind(operator)
        .bind(role)
        .bind(lifetime_ms as f64)
        .fetch_one(ex)
        .await
}

/// `session_get.sql`.
pub async fn session_get<'e>(
    ex: impl PgExecutor<'e>,
    sha256: &[u8],
) -> Result<Option<SessionRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/session_get.sql"))
        .bind(sha256)
        .fetch_optional(ex)
        .await
}

/// `session_delete.sql`.
pub async fn session_delete<'e>(
    ex: impl PgExecutor<'e>,
    sha256: &[u8],
) -> Result<u64, sqlx::Error> {
    Ok(
        sqlx::query(include_str!("../../sql/console/session_delete.sql"))
            .bind(sha256)
            .execute(ex)
            .await?
            .rows_affected(),
    )
}

/// `sessions_delete_expired.sql`.
pub async fn sessions_delete_expired<'e>(
    ex: impl PgExecutor<'e>,
    batch_max: i64,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query(include_str!(
        "../../sql/console/sessions_delete_expired.sql"
    ))
    .bind(batch_max)
    .execute(ex)
    .await?
    .rows_affected())
}

/// `read_only.sql`.
pub async fn read_only<'e>(ex: impl PgExecutor<'e>, timeout_ms: u32) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../sql/console/read_only.sql"))
        .bind(timeout_ms.to_string())
        .execute(ex)
        .await
        .map(|_| ())
}

/// One operator-audit row to append.
#[derive(Debug, Clone, Copy)]
pub struct AuditInsert<'a> {
    /// Who.
    pub operator: &'a str,
    /// With which role.
    pub role: &'a str,
    /// What (`action-admit`, `stream-skip`, …).
    pub action: &'a str,
    /// On what (`action 42`, `acme/p1/device:d1`, …).
    pub target: &'a str,
    /// The result or the operator's reason.
    pub detail: &'a str,
    /// The request's correlation id.
    pub correlation_id: &'a str,
    /// The action it was done to, if one.
    pub action_id: Option<i64>,
}

/// `audit_insert.sql`.
pub async fn audit_insert<'e>(
    ex: impl PgExecutor<'e>,
    row: AuditInsert<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../sql/console/audit_insert.sql"))
        .bind(row.operator)
        .bind(row.role)
        .bind(row.action)
        .bind(row.target)
        .bind(row.detail)
        .bind(row.correlation_id)
        .bind(row.action_id)
        .execute(ex)
        .await
        .map(|_| ())
}

/// A row of the one operator audit trail, as the console shows it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditRow {
    /// Its id (the page cursor).
    pub audit_id: i64,
    /// Who.
    pub operator: String,
    /// With which console role; `None` for a row the library wrote for the admin API or the
    /// CLI (the operator token and database access hold every right).
    pub role: Option<String>,
    /// What: the console's action name, or the library's operation (`cancel`, `pause`, …).
    pub action: String,
    /// On what (`action 42` for a library row about an action; empty when it names none).
    pub target: String,
    /// Result or reason; a library row's detail as its JSON.
    pub detail: String,
    /// The action it was about, if one.
    pub action_id: Option<i64>,
    /// The request's correlation id.
    pub correlation_id: String,
    /// When.
    pub recorded_at: DateTime<Utc>,
}

/// `audit_page.sql`.
pub async fn audit_page<'e>(
    ex: impl PgExecutor<'e>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/audit_page.sql"))
        .bind(before)
        .bind(limit)
        .fetch_all(ex)
        .await
}

/// A count of live actions (see `live_counts.sql`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LiveCount {
    /// PROPOSED, ADMITTED or EXECUTING.
    pub state: String,
    /// The kind.
    pub kind: String,
    /// How many were found.
    pub n: i64,
}

/// `live_counts.sql`.
pub async fn live_counts<'e>(
    ex: impl PgExecutor<'e>,
    rows_max: i64,
) -> Result<Vec<LiveCount>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/live_counts.sql"))
        .bind(rows_max)
        .fetch_all(ex)
        .await
}

/// Ends in one minute (see `ended_by_minute.sql`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EndedCount {
    /// The minute.
    pub minute: DateTime<Utc>,
    /// The ended state.
    pub state: String,
    /// Its stop reason.
    pub stop_reason: String,
    /// The kind.
    pub kind: String,
    /// How many.
    pub n: i64,
}

/// `ended_by_minute.sql`.
pub async fn ended_by_minute<'e>(
    ex: impl PgExecutor<'e>,
    rows_max: i64,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<EndedCount>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/ended_by_minute.sql"))
        .bind(rows_max)
        .bind(now)
        .fetch_all(ex)
        .await
}

/// Attempts whose provider call started in one minute (see `attempts_by_minute.sql`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AttemptCount {
    /// The minute.
    pub minute: DateTime<Utc>,
    /// How many.
    pub n: i64,
}

/// `attempts_by_minute.sql`: each of its two reads takes at most `rows_max` rows.
pub async fn attempts_by_minute<'e>(
    ex: impl PgExecutor<'e>,
    rows_max: i64,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<AttemptCount>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/attempts_by_minute.sql"))
        .bind(rows_max)
        .bind(now)
        .fetch_all(ex)
        .await
}

/// Due lane heads of one kind (see `due_heads.sql`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DueHeads {
    /// The kind.
    pub kind: String,
    /// Due lane heads found.
    pub due: i64,
    /// The oldest due time among them.
    pub oldest_run_at: DateTime<Utc>,
}

/// `due_heads.sql`.
pub async fn due_heads<'e>(
    ex: impl PgExecutor<'e>,
    rows_max: i64,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<DueHeads>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/due_heads.sql"))
        .bind(rows_max)
        .bind(now)
        .fetch_all(ex)
        .await
}

/// An action as a list shows it (no payload, ever).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ActionLine {
    /// Its id.
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// Its tenant.
    pub tenant_id: Option<String>,
    /// Its project.
    pub project_id: Option<String>,
    /// Its lane.
    pub lane_key: String,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// Its state.
    pub state: String,
    /// Its stop reason, once ended.
    pub stop_reason: Option<String>,
    /// Attempts so far.
    pub attempt: i32,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// The claim epoch.
    pub epoch: i64,
    /// The last stable error code.
    pub error_code: Option<String>,
    /// Not due before.
    pub run_at: DateTime<Utc>,
    /// Enqueued at.
    pub created_at: DateTime<Utc>,
    /// Ended at.
    pub ended_at: Option<DateTime<Utc>>,
}

/// A bounded window of the actions list (see `actions_window.sql`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionsWindow {
    /// Rows read.
    pub scanned: i64,
    /// The lowest id read (the next page starts below it).
    pub scanned_low: Option<i64>,
    /// The matching actions, newest first.
    pub items: Vec<ActionLine>,
}

#[derive(sqlx::FromRow)]
struct WindowRow {
    scanned: i64,
    scanned_low: Option<i64>,
    id: Option<i64>,
    kind: Option<String>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    lane_key: Option<String>,
    idempotency_key: Option<String>,
    state: Option<String>,
    stop_reason: Option<String>,
    attempt: Option<i32>,
    max_attempts: Option<i32>,
    epoch: Option<i64>,
    error_code: Option<String>,
    run_at: Option<DateTime<Utc>>,
    created_at: Option<DateTime<Utc>>,
    ended_at: Option<DateTime<Utc>>,
}

impl WindowRow {
    /// The action on this row, when the lateral join found one.
    fn line(self) -> Option<ActionLine> {
        Some(ActionLine {
            id: self.id?,
            kind: self.kind?,
            tenant_id: self.tenant_id,
            project_id: self.project_id,
            lane_key: self.lane_key?,
            idempotency_key: self.idempotency_key?,
            state: self.state?,
            stop_reason: self.stop_reason,
            attempt: self.attempt?,
            max_attempts: self.max_attempts?,
            epoch: self.epoch?,
            error_code: self.error_code,
            run_at: self.run_at?,
            created_at: self.created_at?,
            ended_at: self.ended_at,
        })
    }
}

/// The filters of `actions_window.sql`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WindowFilter<'a> {
    /// Only this state.
    pub state: Option<&'a str>,
    /// Only this kind.
    pub kind: Option<&'a str>,
    /// Only this tenant.
    pub tenant_id: Option<&'a str>,
    /// Only this lane.
    pub lane_key: Option<&'a str>,
}

/// `actions_window.sql`.
pub async fn actions_window<'e>(
    ex: impl PgExecutor<'e>,
    scan_max: i64,
    below: Option<i64>,
    limit: i64,
    filter: WindowFilter<'_>,
) -> Result<ActionsWindow, sqlx::Error> {
    let rows: Vec<WindowRow> = sqlx::query_as(include_str!("../../sql/console/actions_window.sql"))
        .bind(scan_max)
        .bind(below)
        .bind(limit)
        .bind(filter.state)
        .bind(filter.kind)
        .bind(filter.tenant_id)
        .bind(filter.lane_key)
        .fetch_all(ex)
        .await?;
    let (scanned, scanned_low) = rows
        .first()
        .map(|r| (r.scanned, r.scanned_low))
        .unwrap_or((0, None));
    Ok(ActionsWindow {
        scanned,
        scanned_low,
        items: rows.into_iter().filter_map(WindowRow::line).collect(),
    })
}

/// `action_by_key.sql`.
pub async fn action_by_key<'e>(
    ex: impl PgExecutor<'e>,
    key: &str,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../../sql/console/action_by_key.sql"))
        .bind(key)
        .fetch_optional(ex)
        .await
}

/// Where an action stands in its lane (see `lane_position.sql`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LanePosition {
    /// Unstarted actions ahead of it (a lower bound when the count hit its bound).
    pub ahead: i64,
    /// The lane's executing action, which holds the lane.
    pub holder_id: Option<i64>,
    /// Its claim epoch.
    pub holder_epoch: Option<i64>,
    /// Its attempt.
    pub holder_attempt: Option<i32>,
    /// When its lease ends.
    pub holder_lease_expires_at: Option<DateTime<Utc>>,
    /// When its provider call was fenced, if it was.
    pub holder_write_started_at: Option<DateTime<Utc>>,
}

/// `lane_position.sql`.
pub async fn lane_position<'e>(
    ex: impl PgExecutor<'e>,
    lane_key: &str,
    id: i64,
    rows_max: i64,
) -> Result<LanePosition, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/lane_position.sql"))
        .bind(lane_key)
        .bind(id)
        .bind(rows_max)
        .fetch_one(ex)
        .await
}

/// A busy lane (see `busiest_lanes.sql`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LaneRow {
    /// The lane.
    pub lane_key: String,
    /// Unstarted actions found in it.
    pub depth: i64,
    /// Its first unstarted action.
    pub head_id: i64,
    /// That action's kind.
    pub head_kind: String,
    /// PROPOSED or ADMITTED.
    pub head_state: String,
    /// Not due before.
    pub head_run_at: DateTime<Utc>,
    /// The executing action holding the lane.
    pub holder_id: Option<i64>,
    /// Its epoch.
    pub holder_epoch: Option<i64>,
    /// Its lease end.
    pub holder_lease_expires_at: Option<DateTime<Utc>>,
    /// Its fence time.
    pub holder_write_started_at: Option<DateTime<Utc>>,
    /// The clock the row was read at.
    pub now: DateTime<Utc>,
}

/// Which lanes a page of `busiest_lanes.sql` shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaneFilter<'a> {
    /// Only this lane.
    pub lane: Option<&'a str>,
    /// Only lanes with an unstarted action of this kind.
    pub kind: Option<&'a str>,
    /// Only lanes with an unstarted action of this tenant.
    pub tenant_id: Option<&'a str>,
    /// The page after this (depth, lane key): the last row of the previous page.
    pub after: Option<(i64, &'a str)>,
}

/// `busiest_lanes.sql`.
pub async fn busiest_lanes<'e>(
    ex: impl PgExecutor<'e>,
    sample_max: i64,
    lanes_max: i64,
    filter: LaneFilter<'_>,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<LaneRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/busiest_lanes.sql"))
        .bind(sample_max)
        .bind(lanes_max)
        .bind(filter.lane)
        .bind(now)
        .bind(filter.kind)
        .bind(filter.tenant_id)
        .bind(filter.after.map(|a| a.0))
        .bind(filter.after.map(|a| a.1))
        .fetch_all(ex)
        .await
}

/// An UNCERTAIN action (see `in_doubt.sql`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InDoubtRow {
    /// Its id.
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// Its tenant.
    pub tenant_id: Option<String>,
    /// Its project.
    pub project_id: Option<String>,
    /// Its lane.
    pub lane_key: String,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// UNCERTAIN_PROVIDER or LEASE_LOST_AFTER_WRITE.
    pub stop_reason: String,
    /// Attempts made.
    pub attempt: i32,
    /// Its last epoch.
    pub epoch: i64,
    /// The stable error code.
    pub error_code: Option<String>,
    /// When its last provider call was fenced.
    pub write_started_at: Option<DateTime<Utc>>,
    /// Enqueued at.
    pub created_at: DateTime<Utc>,
    /// Ended at.
    pub ended_at: DateTime<Utc>,
}

/// A bounded window of in-doubt actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InDoubtWindow {
    /// Ended actions read.
    pub scanned: i64,
    /// The oldest (ended_at, id) read: the next page starts before it.
    pub scanned_low: Option<(DateTime<Utc>, i64)>,
    /// The UNCERTAIN ones, newest first.
    pub items: Vec<InDoubtRow>,
}

#[derive(sqlx::FromRow)]
struct InDoubtJoined {
    scanned: i64,
    scanned_low_ended_at: Option<DateTime<Utc>>,
    scanned_low_id: Option<i64>,
    id: Option<i64>,
    kind: Option<String>,
    tenant_id: Option<String>,
    project_id: Option<String>,
    lane_key: Option<String>,
    idempotency_key: Option<String>,
    stop_reason: Option<String>,
    attempt: Option<i32>,
    epoch: Option<i64>,
    error_code: Option<String>,
    write_started_at: Option<DateTime<Utc>>,
    created_at: Option<DateTime<Utc>>,
    ended_at: Option<DateTime<Utc>>,
}

/// `in_doubt.sql`.
pub async fn in_doubt<'e>(
    ex: impl PgExecutor<'e>,
    scan_max: i64,
    before: Option<(DateTime<Utc>, i64)>,
    limit: i64,
) -> Result<InDoubtWindow, sqlx::Error> {
    let rows: Vec<InDoubtJoined> = sqlx::query_as(include_str!("../../sql/console/in_doubt.sql"))
        .bind(scan_max)
        .bind(before.map(|b| b.0))
        .bind(before.map(|b| b.1))
        .bind(limit)
        .fetch_all(ex)
        .await?;
    let head = rows
        .first()
        .map(|r| (r.scanned, r.scanned_low_ended_at.zip(r.scanned_low_id)));
    let (scanned, scanned_low) = head.unwrap_or((0, None));
    let items = rows
        .into_iter()
        .filter_map(|r| {
            Some(InDoubtRow {
                id: r.id?,
                kind: r.kind?,
                tenant_id: r.tenant_id,
                project_id: r.project_id,
                lane_key: r.lane_key?,
                idempotency_key: r.idempotency_key?,
                stop_reason: r.stop_reason?,
                attempt: r.attempt?,
                epoch: r.epoch?,
                error_code: r.error_code,
                write_started_at: r.write_started_at,
                created_at: r.created_at?,
                ended_at: r.ended_at?,
            })
        })
        .collect();
    Ok(InDoubtWindow {
        scanned,
        scanned_low,
        items,
    })
}

/// Inbox answers in one minute (see `inbox_answers.sql`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AnswerCount {
    /// The minute.
    pub minute: DateTime<Utc>,
    /// The outcome.
    pub outcome: String,
    /// Its stable reason.
    pub reason: String,
    /// How many.
    pub n: i64,
}

/// `inbox_answers.sql`.
pub async fn inbox_answers<'e>(
    ex: impl PgExecutor<'e>,
    rows_max: i64,
) -> Result<Vec<AnswerCount>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/inbox_answers.sql"))
        .bind(rows_max)
        .fetch_all(ex)
        .await
}

/// A tenant.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TenantRow {
    /// Its id.
    pub tenant_id: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// `tenants_page.sql`.
pub async fn tenants_page<'e>(
    ex: impl PgExecutor<'e>,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<TenantRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/tenants_page.sql"))
        .bind(after)
        .bind(limit)
        .fetch_all(ex)
        .await
}

/// `projects_of_tenant.sql`.
pub async fn projects_of_tenant<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../../sql/console/projects_of_tenant.sql"))
        .bind(tenant)
        .bind(after)
        .bind(limit)
        .fetch_all(ex)
        .await
}

/// A stream with what lies beyond its cursor (see `streams_page.sql`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StreamRow {
    /// Its id (the page cursor).
    pub stream_id: i64,
    /// `device` or `account`.
    pub producer_kind: String,
    /// The device or account.
    pub producer_id: String,
    /// The contiguous cursor, as text (u64).
    pub acknowledged_sequence: String,
    /// The replay floor, as text (u64).
    pub replay_floor: String,
    /// Created at.
    pub created_at: DateTime<Utc>,
    /// Cursor or floor last moved at.
    pub updated_at: DateTime<Utc>,
    /// Retained identities beyond the cursor (a lower bound at the count's bound).
    pub retained_ahead: i64,
    /// The first retained sequences beyond the cursor, ascending, as text.
    pub ahead: Vec<String>,
}

/// `streams_page.sql`.
pub async fn streams_page<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    after: Option<i64>,
    limit: i64,
    ahead_max: i64,
    count_max: i64,
) -> Result<Vec<StreamRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/streams_page.sql"))
        .bind(tenant)
        .bind(project)
        .bind(after)
        .bind(limit)
        .bind(ahead_max)
        .bind(count_max)
        .fetch_all(ex)
        .await
}

/// A verification key as the console lists it (no key material at all).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyLine {
    /// The key id.
    pub key_id: String,
    /// active, retired or revoked.
    pub state: String,
    /// How long a retired key keeps verifying.
    pub replay_window_seconds: i64,
    /// Added at.
    pub created_at: DateTime<Utc>,
    /// Retired at.
    pub retired_at: Option<DateTime<Utc>>,
    /// Revoked at.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// `keys_page.sql`.
pub async fn keys_page<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<KeyLine>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/keys_page.sql"))
        .bind(tenant)
        .bind(project)
        .bind(after)
        .bind(limit)
        .fetch_all(ex)
        .await
}

/// A credential as the console lists it (never the token or its hash).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CredentialLine {
    /// Its id.
    pub credential_id: i64,
    /// Its account.
    pub account_id: String,
    /// Its device.
    pub device_id: Option<String>,
    /// Issued at.
    pub created_at: DateTime<Utc>,
    /// Revoked at.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// `credentials_page.sql`.
pub async fn credentials_page<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    after: Option<i64>,
    limit: i64,
) -> Result<Vec<CredentialLine>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/credentials_page.sql"))
        .bind(tenant)
        .bind(after)
        .bind(limit)
        .fetch_all(ex)
        .await
}

/// An inbox audit row (redacted by construction: the table holds nothing secret).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InboxAuditLine {
    /// Its id.
    pub audit_id: i64,
    /// ingest, stream-skip or stream-advance-floor.
    pub action: String,
    /// The actor's account (the operator for operator actions).
    pub actor_account: String,
    /// The actor's device.
    pub actor_device: Option<String>,
    /// The stream's producer kind.
    pub producer_kind: Option<String>,
    /// The stream's producer.
    pub producer_id: Option<String>,
    /// SHA-256 hex of the event id.
    pub event_id_sha256: Option<String>,
    /// The envelope's sequence.
    pub producer_sequence: Option<String>,
    /// The outcome.
    pub outcome: String,
    /// Its reason.
    pub reason: String,
    /// Operator actions: the value before.
    pub sequence_before: Option<String>,
    /// Operator actions: the value after.
    pub sequence_after: Option<String>,
    /// The correlation id.
    pub correlation_id: String,
    /// When.
    pub recorded_at: DateTime<Utc>,
}

/// `inbox_audit_page.sql`.
pub async fn inbox_audit_page<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    before: Option<(DateTime<Utc>, i64)>,
    limit: i64,
) -> Result<Vec<InboxAuditLine>, sqlx::Error> {
    sqlx::query_as(include_str!("../../sql/console/inbox_audit_page.sql"))
        .bind(tenant)
        .bind(project)
        .bind(before.map(|b| b.0))
        .bind(before.map(|b| b.1))
        .bind(limit)
        .fetch_all(ex)
        .await
}
