//! What the operator console (served by `wharf serve`, rendered by `wharf-http`) needs from the
//! database: sign-in sessions, the operator audit trail, and a bounded read model of the outbox
//! and the inbox.
//!
//! Owns: the session rules (a token of 32 random bytes, stored only as its SHA-256; a lifetime
//! of at most [`SESSION_MS_MAX`], decided by the database clock; a CSRF token bound to the
//! session), the console's rows of the one operator audit trail (`wharf.operator_audit`, which
//! the library's own operator actions write too and `wharf audit` reads: append-only, who /
//! role / what / on what / when; [`audit`] reads every row of it, the library's too), and the
//! bounds of every console read: at most [`PAGE_ROWS_MAX`] rows a page, at most
//! [`SCAN_ROWS_MAX`] rows read for a filtered page, at most [`COUNT_ROWS_MAX`] rows counted, in
//! a read-only transaction whose statements time out after [`READ_TIMEOUT_MS`]. No console read
//! costs more with a bigger table: a filtered page reads a fixed window and says where the next
//! one starts; a count is a lower bound once it reaches its bound.
//!
//! Must not know: HTTP, cookies or HTML. It changes nothing but sessions and the audit: every
//! operator action the console offers is a call of the same library function the HTTP admin
//! API and the CLI call ([`crate::outbox::admit`], [`crate::inbox::streams::skip`], …), made
//! by the caller in the transaction that also records it here.

use chrono::{DateTime, Utc};
use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgExecutor};

use crate::core::envelope::is_identity;
use crate::store::console as store;

pub use crate::store::console::{
    ActionLine, ActionsWindow, AnswerCount, AttemptCount, AuditRow, CredentialLine, DueHeads,
    EndedCount, InDoubtRow, InDoubtWindow, InboxAuditLine, KeyLine, LaneFilter, LanePosition,
    LaneRow, LiveCount, StreamRow, TenantRow, WindowFilter,
};

/// Longest session: a day. A stolen cookie is worth at most that, and an operator signs in at
/// most once a working day.
pub const SESSION_MS_MAX: u64 = 24 * 3600 * 1000;
/// The session lifetime when the configuration says nothing: a working day's shift.
pub const SESSION_MS_DEFAULT: u64 = 8 * 3600 * 1000;
/// Rows on one console page.
pub const PAGE_ROWS_MAX: i64 = 100;
/// Rows a filtered list page reads at most before it stops and offers the next window.
/// Measured: 10,000 rows of the primary key read in a few milliseconds on this machine.
pub const SCAN_ROWS_MAX: i64 = 10_000;
/// Rows a count reads at most; beyond it the console says "at least".
pub const COUNT_ROWS_MAX: i64 = 50_000;
/// Retained sequences beyond a stream's cursor read to show its gaps.
pub const GAP_SEQUENCES_MAX: i64 = 100;
/// Milliseconds any console statement may run before PostgreSQL cancels it.
pub const READ_TIMEOUT_MS: u32 = 2_000;
/// Longest audit target or detail, in bytes (the table's bound).
pub const AUDIT_TEXT_BYTES_MAX: usize = 512;
/// Expired sessions deleted per sign-in.
pub const EXPIRED_SESSIONS_BATCH_MAX: i64 = 100;

/// Why a console call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument breaks a rule (an operator name that is not an identity, a lifetime beyond
    /// [`SESSION_MS_MAX`], a page size above [`PAGE_ROWS_MAX`]). Retrying never helps.
    #[error("invalid {what}: {why}")]
    Invalid {
        /// The argument.
        what: &'static str,
        /// The rule it breaks.
        why: String,
    },
    /// The database failed, or a read ran past [`READ_TIMEOUT_MS`]. Nothing was changed by a
    /// read; a retry may help.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

fn invalid(what: &'static str, why: impl Into<String>) -> Error {
    Error::Invalid {
        what,
        why: why.into(),
    }
}

/// What a signed-in operator may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Signed in with the operator token: sees everything, may act.
    Operator,
    /// Signed in with the read-only token: sees everything, changes nothing.
    ReadOnly,
}

impl Role {
    /// As stored: `operator` or `read-only`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Operator => "operator",
            Role::ReadOnly => "read-only",
        }
    }

    fn parse(text: &str) -> Option<Role> {
        match text {
            "operator" => Some(Role::Operator),
            "read-only" => Some(Role::ReadOnly),
            _ => None,
        }
    }
}

/// A live console session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Who signed in (as they named themselves; the token decided the role).
    pub operator: String,
    /// What they may do.
    pub role: Role,
    /// When they signed in.
    pub created_at: DateTime<Utc>,
    /// When the session ends.
    pub expires_at: DateTime<Utc>,
}

impl TryFrom<store::SessionRow> for Session {
    type Error = Error;

    fn try_from(row: store::SessionRow) -> Result<Session, Error> {
        Ok(Session {
            role: Role::parse(&row.role).ok_or_else(|| {
                Error::Database(sqlx::Error::Protocol(format!(
                    "unknown role {:?}",
                    row.role
                )))
            })?,
            operator: row.operator,
            created_at: row.created_at,
            expires_at: row.expires_at,
        })
    }
}

/// A session token: 32 random bytes, hex. The browser holds it; the database holds its hash.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionToken(String);

impl std::fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionToken(…)")
    }
}

impl SessionToken {
    /// A token as a browser sent it back; `None` when it cannot be one (wrong length or
    /// alphabet), so a malformed cookie never reaches the database.
    pub fn parse(text: &str) -> Option<SessionToken> {
        (text.len() == 64
            && text
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
        .then(|| SessionToken(text.to_owned()))
    }

    /// The token's text (for the cookie).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The CSRF token of this session: SHA-256 of a fixed label and the session token, hex. A
    /// page of another origin can read neither, and it needs no storage of its own.
    pub fn csrf(&self) -> String {
        hex::encode(Sha256::digest(
            format!("wharf-console-csrf\0{}", self.0).as_bytes(),
        ))
    }

    fn sha256(&self) -> [u8; 32] {
        Sha256::digest(self.0.as_bytes()).into()
    }
}

/// Signs an operator in: deletes a batch of expired sessions, then stores a new one that ends
/// `lifetime_ms` from now (1..=[`SESSION_MS_MAX`]). The caller has already checked the token
/// that decided `role`.
pub async fn sign_in(
    conn: &mut PgConnection,
    operator: &str,
    role: Role,
    lifetime_ms: u64,
) -> Result<(SessionToken, Session), Error> {
    if !is_identity(operator) {
        return Err(invalid(
            "operator",
            "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
        ));
    }
    if lifetime_ms == 0 || lifetime_ms > SESSION_MS_MAX {
        return Err(invalid(
            "session lifetime",
            format!("must be 1..={SESSION_MS_MAX} ms"),
        ));
    }
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let token = SessionToken(hex::encode(bytes));
    store::sessions_delete_expired(&mut *conn, EXPIRED_SESSIONS_BATCH_MAX).await?;
    let row = store::session_insert(
        &mut *conn,
        &token.sha256(),
        operator,
        role.as_str(),
        lifetime_ms as i64,
    )
    .await?;
    Ok((token, row.try_into()?))
}

/// The live session of a token, `None` when it never existed, expired or was ended.
pub async fn session<'e>(
    ex: impl PgExecutor<'e>,
    token: &SessionToken,
) -> Result<Option<Session>, Error> {
    store::session_get(ex, &token.sha256())
        .await?
        .map(Session::try_from)
        .transpose()
}

/// Ends a session (sign-out). Whether there was one.
pub async fn sign_out<'e>(ex: impl PgExecutor<'e>, token: &SessionToken) -> Result<bool, Error> {
    Ok(store::session_delete(ex, &token.sha256()).await? > 0)
}

/// One operator action to record.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// Who did it, and with which role.
    pub session: &'a Session,
    /// What (`action-admit`, `subject-erase`, `stream-skip`, `sign-in`, …).
    pub action: &'static str,
    /// On what.
    pub target: &'a str,
    /// The result, or the operator's reason.
    pub detail: &'a str,
    /// The request's correlation id.
    pub correlation_id: &'a str,
    /// The action it was done to, if one (so `wharf audit --action` finds it too).
    pub action_id: Option<i64>,
}

/// Cuts text to at most `max` bytes on a character boundary.
fn bounded(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Appends an operator action to the audit trail, in the caller's transaction (the one that
/// made the change, so the record and the change commit together or not at all). Target and
/// detail longer than [`AUDIT_TEXT_BYTES_MAX`] are cut.
pub async fn record<'e>(ex: impl PgExecutor<'e>, entry: Entry<'_>) -> Result<(), Error> {
    store::audit_insert(
        ex,
        store::AuditInsert {
            operator: &entry.session.operator,
            role: entry.session.role.as_str(),
            action: entry.action,
            target: bounded(entry.target, AUDIT_TEXT_BYTES_MAX),
            detail: bounded(entry.detail, AUDIT_TEXT_BYTES_MAX),
            correlation_id: bounded(entry.correlation_id, 128),
            action_id: entry.action_id,
        },
    )
    .await?;
    Ok(())
}

fn page_rows(limit: i64) -> Result<i64, Error> {
    if !(1..=PAGE_ROWS_MAX).contains(&limit) {
        return Err(invalid("limit", format!("must be 1..={PAGE_ROWS_MAX}")));
    }
    Ok(limit)
}

/// A page of the operator audit, newest first, before `before`.
pub async fn audit<'e>(
    ex: impl PgExecutor<'e>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditRow>, Error> {
    Ok(store::audit_page(ex, before, page_rows(limit)?).await?)
}

/// Begins a console read: a read-only transaction whose statements are cancelled after
/// [`READ_TIMEOUT_MS`].
pub async fn begin_read(
    pool: &sqlx::PgPool,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, Error> {
    let mut tx = pool.begin().await?;
    store::read_only(&mut *tx, READ_TIMEOUT_MS).await?;
    Ok(tx)
}

/// What the overview shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Overview {
    /// Unstarted and executing actions by state and kind (lower bounds when `live_capped`).
    pub live: Vec<LiveCount>,
    /// Whether a live count reached [`COUNT_ROWS_MAX`].
    pub live_capped: bool,
    /// Ends of the last hour by minute (lower bounds when `ended_capped`).
    pub ended: Vec<EndedCount>,
    /// Whether the ends read reached [`COUNT_ROWS_MAX`].
    pub ended_capped: bool,
    /// Attempts of the last hour by the minute their provider call started: the latest attempt
    /// of each action that ended in the last hour or is executing (no earlier attempt keeps a
    /// time; see `attempts_by_minute.sql`). Lower bounds when `attempts_capped`.
    pub attempts: Vec<AttemptCount>,
    /// Whether either attempts read may have reached [`COUNT_ROWS_MAX`].
    pub attempts_capped: bool,
    /// Due lane heads and the oldest due time, per kind.
    pub due: Vec<DueHeads>,
    /// Whether the due read reached [`COUNT_ROWS_MAX`].
    pub due_capped: bool,
    /// The most recent UNCERTAIN ends.
    pub uncertain: Vec<InDoubtRow>,
    /// The newest inbox answers by minute, outcome and reason.
    pub answers: Vec<AnswerCount>,
    /// Whether the answers read reached [`COUNT_ROWS_MAX`].
    pub answers_capped: bool,
}

/// Recent UNCERTAIN ends the overview lists.
pub const OVERVIEW_UNCERTAIN_MAX: i64 = 10;

/// Reads the overview. `now` for tests (None: the database clock).
pub async fn overview(
    conn: &mut PgConnection,
    now: Option<DateTime<Utc>>,
) -> Result<Overview, Error> {
    let live = store::live_counts(&mut *conn, COUNT_ROWS_MAX).await?;
    let ended = store::ended_by_minute(&mut *conn, COUNT_ROWS_MAX, now).await?;
    let attempts = store::attempts_by_minute(&mut *conn, COUNT_ROWS_MAX, now).await?;
    let due = store::due_heads(&mut *conn, COUNT_ROWS_MAX, now).await?;
    let uncertain =
        store::in_doubt(&mut *conn, SCAN_ROWS_MAX, None, OVERVIEW_UNCERTAIN_MAX).await?;
    let answers = store::inbox_answers(&mut *conn, COUNT_ROWS_MAX).await?;
    let sum = |n: &mut dyn Iterator<Item = i64>| n.sum::<i64>();
    let pending = sum(&mut live.iter().filter(|c| c.state != "EXECUTING").map(|c| c.n));
    let executing = sum(&mut live.iter().filter(|c| c.state == "EXECUTING").map(|c| c.n));
    Ok(Overview {
        live_capped: pending >= COUNT_ROWS_MAX || executing >= COUNT_ROWS_MAX,
        ended_capped: sum(&mut ended.iter().map(|c| c.n)) >= COUNT_ROWS_MAX,
        // Its two reads are the ends window above and the executing actions, each stopping at
        // the same bound: either reaching it may have left attempts out.
        attempts_capped: sum(&mut ended.iter().map(|c| c.n)) >= COUNT_ROWS_MAX
            || executing >= COUNT_ROWS_MAX,
        due_capped: sum(&mut due.iter().map(|c| c.due)) >= COUNT_ROWS_MAX,
        answers_capped: sum(&mut answers.iter().map(|c| c.n)) >= COUNT_ROWS_MAX,
        live,
        ended,
        attempts,
        due,
        uncertain: uncertain.items,
        answers,
    })
}

/// The newest inbox answers (at most [`COUNT_ROWS_MAX`]) by minute, outcome and reason, and
/// whether the read reached that bound.
pub async fn inbox_answers<'e>(ex: impl PgExecutor<'e>) -> Result<(Vec<AnswerCount>, bool), Error> {
    let answers = store::inbox_answers(ex, COUNT_ROWS_MAX).await?;
    let capped = answers.iter().map(|a| a.n).sum::<i64>() >= COUNT_ROWS_MAX;
    Ok((answers, capped))
}

/// One page of the actions list: the window of at most [`SCAN_ROWS_MAX`] ids below `below`,
/// filtered. An idempotency key narrows to its one action wherever it is.
pub async fn actions(
    conn: &mut PgConnection,
    below: Option<i64>,
    limit: i64,
    filter: WindowFilter<'_>,
    idempotency_key: Option<&str>,
) -> Result<ActionsWindow, Error> {
    let limit = page_rows(limit)?;
    if let Some(key) = idempotency_key {
        let Some(id) = store::action_by_key(&mut *conn, key).await? else {
            return Ok(ActionsWindow {
                scanned: 0,
                scanned_low: None,
                items: Vec::new(),
            });
        };
        // The window just above the key's action holds exactly it (and the filters still apply).
        let mut window = store::actions_window(&mut *conn, 1, Some(id + 1), limit, filter).await?;
        window.scanned_low = None;
        return Ok(window);
    }
    Ok(store::actions_window(&mut *conn, SCAN_ROWS_MAX, below, limit, filter).await?)
}

/// Where an action stands in its lane.
pub async fn lane_position<'e>(
    ex: impl PgExecutor<'e>,
    lane_key: &str,
    id: i64,
) -> Result<LanePosition, Error> {
    Ok(store::lane_position(ex, lane_key, id, COUNT_ROWS_MAX).await?)
}

/// A page of the busiest lanes (at most `limit`, busiest first) among the first
/// [`COUNT_ROWS_MAX`] unstarted actions in lane order, filtered; the next page starts after
/// the last row's (depth, lane key). Every page reads the same bounded sample, so its cost does
/// not grow with the table.
pub async fn lanes<'e>(
    ex: impl PgExecutor<'e>,
    limit: i64,
    filter: LaneFilter<'_>,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<LaneRow>, Error> {
    Ok(store::busiest_lanes(ex, COUNT_ROWS_MAX, page_rows(limit)?, filter, now).await?)
}

/// A page of UNCERTAIN actions, newest end first, before `before`.
pub async fn in_doubt<'e>(
    ex: impl PgExecutor<'e>,
    before: Option<(DateTime<Utc>, i64)>,
    limit: i64,
) -> Result<InDoubtWindow, Error> {
    Ok(store::in_doubt(ex, SCAN_ROWS_MAX, before, page_rows(limit)?).await?)
}

/// A page of tenants after `after`.
pub async fn tenants<'e>(
    ex: impl PgExecutor<'e>,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<TenantRow>, Error> {
    Ok(store::tenants_page(ex, after, page_rows(limit)?).await?)
}

/// A page of a tenant's projects after `after`.
pub async fn projects<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<String>, Error> {
    Ok(store::projects_of_tenant(ex, tenant, after, page_rows(limit)?).await?)
}

/// A stream with its gaps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamView {
    /// The stream as stored.
    pub row: StreamRow,
    /// The contiguous cursor.
    pub cursor: u64,
    /// The replay floor.
    pub floor: u64,
    /// Missing sequence ranges (inclusive) between the cursor and the retained sequences read.
    pub gaps: Vec<(u64, u64)>,
}

/// The missing ranges (inclusive) between a cursor and the retained sequences beyond it
/// (ascending): what a producer still owes, or an operator may skip.
pub fn gaps(cursor: u64, ahead: &[u64]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut next = cursor.saturating_add(1);
    for &seq in ahead {
        if seq > next {
            out.push((next, seq - 1));
        }
        next = next.max(seq.saturating_add(1));
    }
    out
}

/// A page of the streams of (tenant, project), each with its gaps.
pub async fn streams<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    after: Option<i64>,
    limit: i64,
) -> Result<Vec<StreamView>, Error> {
    let rows = store::streams_page(
        ex,
        tenant,
        project,
        after,
        page_rows(limit)?,
        GAP_SEQUENCES_MAX,
        COUNT_ROWS_MAX,
    )
    .await?;
    let seq = |text: &str| {
        text.parse::<u64>().map_err(|_| {
            Error::Database(sqlx::Error::Protocol(format!("not a sequence: {text:?}")))
        })
    };
    rows.into_iter()
        .map(|row| {
            let cursor = seq(&row.acknowledged_sequence)?;
            let floor = seq(&row.replay_floor)?;
            let ahead = row
                .ahead
                .iter()
                .map(|s| seq(s))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(StreamView {
                gaps: gaps(cursor, &ahead),
                cursor,
                floor,
                row,
            })
        })
        .collect()
}

/// A page of the verification keys of (tenant, project) after key id `after`.
pub async fn keys<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<KeyLine>, Error> {
    Ok(store::keys_page(ex, tenant, project, after, page_rows(limit)?).await?)
}

/// A page of a tenant's credentials after `after`.
pub async fn credentials<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    after: Option<i64>,
    limit: i64,
) -> Result<Vec<CredentialLine>, Error> {
    Ok(store::credentials_page(ex, tenant, after, page_rows(limit)?).await?)
}

/// A page of the inbox audit of (tenant, project), newest first.
pub async fn inbox_audit<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    before: Option<(DateTime<Utc>, i64)>,
    limit: i64,
) -> Result<Vec<InboxAuditLine>, Error> {
    Ok(store::inbox_audit_page(ex, tenant, project, before, page_rows(limit)?).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_the_missing_ranges_beyond_the_cursor() {
        let check = |cursor: u64, ahead: &[u64], expected: &[(u64, u64)]| {
            assert_eq!(gaps(cursor, ahead), expected, "{cursor} {ahead:?}")
        };
        check(0, &[], &[]);
        check(3, &[5], &[(4, 4)]);
        check(3, &[7, 8, 10], &[(4, 6), (9, 9)]);
        check(0, &[1, 2], &[]);
        check(u64::MAX - 1, &[u64::MAX], &[]);
    }

    #[test]
    fn a_session_token_is_64_lowercase_hex_and_its_csrf_differs() {
        assert!(SessionToken::parse(&"a".repeat(64)).is_some());
        assert!(SessionToken::parse(&"A".repeat(64)).is_none());
        assert!(SessionToken::parse(&"a".repeat(63)).is_none());
        assert!(SessionToken::parse(&"g".repeat(64)).is_none());
        let token = SessionToken::parse(&"a".repeat(64)).unwrap();
        assert_eq!(token.csrf().len(), 64);
        assert_ne!(token.csrf(), token.expose());
        assert_ne!(
            token.csrf(),
            SessionToken::parse(&"b".repeat(64)).unwrap().csrf()
        );
        assert_eq!(format!("{token:?}"), "SessionToken(…)");
    }

    #[test]
    fn audit_text_is_cut_on_a_character_boundary() {
        assert_eq!(bounded("abc", 5), "abc");
        assert_eq!(bounded("ééé", 5), "éé");
        assert_eq!(bounded("abcdef", 3), "abc");
    }
}
