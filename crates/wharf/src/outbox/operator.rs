//! Operator actions on the outbox: cancel an unstarted action, resolve an in-doubt one (and
//! resend it), and read what operators did. Each takes the caller's connection or transaction
//! first (STYLE §3) and writes its change and its audit row together, or nothing.
//!
//! - [`cancel`]: PROPOSED or ADMITTED ⇒ CANCELLED / `OPERATOR`. An EXECUTING action is
//!   refused ([`Error::NotCancellable`]): its attempt may already be at the provider, and
//!   ending the row under it would only hide an effect that happens anyway. Cancel it once its
//!   attempt ends (it is then ADMITTED again, or ended).
//! - [`resolve`]: an UNCERTAIN action stays ended and unchanged (the seed: an ended action never
//!   changes and nothing sends it again). What the operator found out goes into an append-only
//!   resolution beside it; with [`Resolve::resend`] a new action of the same kind, scope and
//!   lane is enqueued with the payload the operator supplies (the original's is gone by design),
//!   under the derived key [`resend_key`], and linked to the original.
//! - [`resend`]: the same link for an application that still has the payload, without a
//!   resolution.
//! - [`audit`], [`resolutions`], [`resend_of`]: reading.
//!
//! Owns: when an operator action is allowed, the audit's detail, the derived resend key. Must
//! not know: HTTP, the CLI, or how an operator authenticated (the caller names the actor).

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use sqlx::{Acquire, PgConnection, PgExecutor};
use wharf_core::action::{ActionState, StopReason};

use super::error::Error;
use super::kind::Registry;
use super::ops::{Enqueued, enqueue};
use super::request::ActionRequest;
use crate::store;

/// Bytes an actor name may have.
pub const ACTOR_BYTES_MAX: usize = 256;
/// Bytes a correlation id may have (the HTTP layer's bound too).
pub const CORRELATION_ID_BYTES_MAX: usize = 64;
/// Bytes a resolution note may have.
pub const NOTE_BYTES_MAX: usize = 512;
/// Most audit rows one [`audit`] page returns.
pub const AUDIT_LIMIT_MAX: u32 = 100;

/// Who does an operator action, and the id that ties it to their request and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// A name for the person or tool (1..=256 bytes, no control characters).
    pub actor: String,
    /// 1..=64 bytes of `A-Z a-z 0-9 - _ . :`.
    pub correlation_id: String,
}

impl Operator {
    /// An operator; checked when used.
    pub fn new(actor: impl Into<String>, correlation_id: impl Into<String>) -> Operator {
        Operator {
            actor: actor.into(),
            correlation_id: correlation_id.into(),
        }
    }

    pub(crate) fn check(&self) -> Result<(), Error> {
        let actor = &self.actor;
        if actor.is_empty() || actor.len() > ACTOR_BYTES_MAX || actor.chars().any(char::is_control)
        {
            return Err(Error::Invalid {
                field: "actor",
                rule: format!("1..={ACTOR_BYTES_MAX} bytes without control characters"),
            });
        }
        let id = &self.correlation_id;
        if id.is_empty()
            || id.len() > CORRELATION_ID_BYTES_MAX
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        {
            return Err(Error::Invalid {
                field: "correlation_id",
                rule: format!("1..={CORRELATION_ID_BYTES_MAX} bytes of A-Z a-z 0-9 - _ . :"),
            });
        }
        Ok(())
    }
}

/// What [`cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled {
    /// The action, now CANCELLED / `OPERATOR`.
    pub id: i64,
    /// Its state before: PROPOSED or ADMITTED.
    pub from: ActionState,
    /// The audit row written with it.
    pub audit_id: i64,
}

/// Cancels an action that has not started: PROPOSED or ADMITTED ⇒ CANCELLED / `OPERATOR`, its
/// payload dropped, and one audit row, in the caller's transaction (a savepoint of it; a bare
/// connection gets its own transaction). Refuses with nothing written: an unknown id
/// ([`Error::NotFound`]), an EXECUTING or ended action ([`Error::NotCancellable`]), a bad
/// operator ([`Error::Invalid`]).
pub async fn cancel(conn: &mut PgConnection, op: &Operator, id: i64) -> Result<Cancelled, Error> {
    op.check()?;
    let mut tx = conn.begin().await?;
    let action = store::operator::lock_action(&mut tx, id)
        .await?
        .ok_or(Error::NotFound(id))?;
    let from = parse_state(&action.state)?;
    if !matches!(from, ActionState::Proposed | ActionState::Admitted) {
        return Err(Error::NotCancellable { id, state: from });
    }
    if !store::operator::cancel(&mut *tx, id).await? {
        // The row is locked and was unstarted a statement ago: only a bug gets here.
        return Err(protocol(format!("action {id} changed under its lock")));
    }
    let detail = json!({"from": from.as_str(), "kind": action.kind});
    let audit_id = store::operator::audit_insert(
        &mut *tx,
        "cancel",
        Some(id),
        &op.actor,
        &detail,
        &op.correlation_id,
    )
    .await?;
    tx.commit().await?;
    // Counted when the statement ran, like a refusal (ops.rs).
    super::metrics::ended(
        &action.kind,
        id,
        ActionState::Cancelled,
        StopReason::Operator,
    );
    Ok(Cancelled { id, from, audit_id })
}

/// What an operator found out about an in-doubt action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Finding {
    /// The provider holds the effect.
    Delivered,
    /// The provider does not hold it.
    NotDelivered,
}

impl Finding {
    /// The stored name: `delivered` or `not-delivered`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Finding::Delivered => "delivered",
            Finding::NotDelivered => "not-delivered",
        }
    }
}

impl std::str::FromStr for Finding {
    type Err = Error;

    fn from_str(s: &str) -> Result<Finding, Error> {
        match s {
            "delivered" => Ok(Finding::Delivered),
            "not-delivered" => Ok(Finding::NotDelivered),
            _ => Err(Error::Invalid {
                field: "finding",
                rule: "delivered or not-delivered".into(),
            }),
        }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A resolution to record with [`resolve`].
#[derive(Debug, Clone, PartialEq)]
pub struct Resolve {
    /// What the operator found out.
    pub finding: Finding,
    /// Why they think so (a ticket, what the provider's console showed): ≤ 512 bytes, no NUL.
    pub note: String,
    /// Send it again with this payload (only with [`Finding::NotDelivered`]).
    pub resend: Option<Value>,
}

/// One recorded resolution.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[non_exhaustive]
pub struct Resolution {
    pub resolution_id: i64,
    pub action_id: i64,
    pub finding: Finding,
    pub note: String,
    pub actor: String,
    /// The action enqueued to stand in for this one, if a resend was asked for.
    pub resent_action_id: Option<i64>,
    pub correlation_id: String,
    pub recorded_at: DateTime<Utc>,
}

/// What [`resolve`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The resolution written.
    pub resolution: Resolution,
    /// The resend, when one was asked for (`created: false` when an earlier resolution already
    /// enqueued it with the same payload).
    pub resent: Option<Enqueued>,
    /// The audit row written with it.
    pub audit_id: i64,
}

/// The idempotency key of the one resend an original can have. Derived from the id, not the
/// original's key, so it stays within the key bound whatever that key was.
pub fn resend_key(original_id: i64) -> String {
    format!("wharf-resend:{original_id}")
}

/// Records what an operator found out about an UNCERTAIN action, and optionally sends it
/// again, in the caller's transaction (a savepoint of it), with one audit row. The action
/// itself never changes.
///
/// Refuses with nothing written: an unknown id ([`Error::NotFound`]), an action that is not
/// UNCERTAIN ([`Error::NotInDoubt`]), a note over [`NOTE_BYTES_MAX`] or a resend with
/// [`Finding::Delivered`] ([`Error::Invalid`]), a resend payload the kind refuses (the
/// enqueue errors), a different payload than an earlier resend of the same action
/// ([`Error::IdempotencyConflict`]).
pub async fn resolve(
    conn: &mut PgConnection,
    registry: &Registry,
    op: &Operator,
    id: i64,
    resolve: Resolve,
) -> Result<Resolved, Error> {
    op.check()?;
    if resolve.note.len() > NOTE_BYTES_MAX || resolve.note.contains('\0') {
        return Err(Error::Invalid {
            field: "note",
            rule: format!("at most {NOTE_BYTES_MAX} bytes, no NUL"),
        });
    }
    if resolve.resend.is_some() && resolve.finding == Finding::Delivered {
        return Err(Error::Invalid {
            field: "resend",
            rule: "only an action found not delivered is sent again".into(),
        });
    }
    let mut tx = conn.begin().await?;
    let action = store::operator::lock_action(&mut tx, id)
        .await?
        .ok_or(Error::NotFound(id))?;
    let state = parse_state(&action.state)?;
    if state != ActionState::Uncertain {
        return Err(Error::NotInDoubt { id, state });
    }
    let resent = match resolve.resend {
        Some(payload) => Some(resend_locked(&mut tx, registry, &action, payload).await?),
        None => None,
    };
    let row = store::operator::resolution_insert(
        &mut *tx,
        id,
        resolve.finding.as_str(),
        &resolve.note,
        &op.actor,
        resent.map(|r| r.id),
        &op.correlation_id,
    )
    .await?;
    // The note stays in the resolution; the audit says only that there was one.
    let detail = json!({
        "finding": resolve.finding.as_str(),
        "resolution_id": row.resolution_id,
        "resent_action_id": resent.map(|r| r.id),
        "kind": action.kind,
    });
    let audit_id = store::operator::audit_insert(
        &mut *tx,
        "resolve",
        Some(id),
        &op.actor,
        &detail,
        &op.correlation_id,
    )
    .await?;
    tx.commit().await?;
    Ok(Resolved {
        resolution: resolution(row)?,
        resent,
        audit_id,
    })
}

/// Enqueues a new action that stands in for `original_id` (same kind, scope, lane and subject;
/// key [`resend_key`]; admitted), with a payload the caller still has, and links the two. For
/// an application that keeps its payloads; an operator uses [`resolve`], which also records
/// the finding. Any original that exists may be resent: the caller decides it was not
/// delivered. Asking twice with the same payload is the same action (`created: false`).
pub async fn resend(
    conn: &mut PgConnection,
    registry: &Registry,
    original_id: i64,
    payload: Value,
) -> Result<Enqueued, Error> {
    let mut tx = conn.begin().await?;
    let action = store::operator::lock_action(&mut tx, original_id)
        .await?
        .ok_or(Error::NotFound(original_id))?;
    let enqueued = resend_locked(&mut tx, registry, &action, payload).await?;
    tx.commit().await?;
    Ok(enqueued)
}

async fn resend_locked(
    conn: &mut PgConnection,
    registry: &Registry,
    original: &store::operator::LockedAction,
    payload: Value,
) -> Result<Enqueued, Error> {
    let mut req = ActionRequest::new(
        original.kind.clone(),
        original.lane_key.clone(),
        resend_key(original.id),
        payload,
    );
    req.tenant_id = original.tenant_id.clone();
    req.project_id = original.project_id.clone();
    req.subject_account_id = original.subject_account_id.clone();
    let enqueued = enqueue(&mut *conn, registry, req).await?;
    store::operator::resend_link(&mut *conn, enqueued.id, original.id).await?;
    Ok(enqueued)
}

/// Every resolution of one action, oldest first; the last is the current finding. Empty when
/// there is none (or no such action).
pub async fn resolutions<'c>(
    executor: impl PgExecutor<'c>,
    action_id: i64,
) -> Result<Vec<Resolution>, Error> {
    store::operator::resolution_list(executor, action_id)
        .await?
        .into_iter()
        .map(resolution)
        .collect()
}

/// The action a resend stands in for, if `action_id` is one.
pub async fn resend_of<'c>(
    executor: impl PgExecutor<'c>,
    action_id: i64,
) -> Result<Option<i64>, Error> {
    Ok(store::operator::resend_of(executor, action_id).await?)
}

/// One operator action as the one audit trail recorded it: the library's own rows (whoever
/// called it: the admin API, the CLI, the console) and the console's rows (sign-in, sign-out
/// and every action taken there, with the session's role).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[non_exhaustive]
pub struct AuditEntry {
    pub audit_id: i64,
    /// The library's `cancel`, `resolve`, `redrive`, `pause` or `resume`; or, on a console row
    /// (`role` set), the console's action name (`sign-in`, `action-admit`, `stream-skip`, …).
    pub operation: String,
    /// The action it was about; `None` for `pause` and `resume` (the kind and tenant are in
    /// `detail`) and for console rows not done to one action.
    pub action_id: Option<i64>,
    pub actor: String,
    /// The console session's role on a console row; absent on the library's rows (left out of
    /// the JSON, so those read as they always did).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// What a console action was done to (`action 42`, `kind email`, …); absent on the
    /// library's rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// States, ids and codes; never a payload or a note. A console row's is
    /// `{"result": …}`: its result, or the reason the operator gave.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub detail: Value,
    pub correlation_id: String,
    pub recorded_at: DateTime<Utc>,
}

/// What [`audit`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this action's entries.
    pub action_id: Option<i64>,
    /// Only entries after this one: the last `audit_id` of the previous page.
    pub after_id: Option<i64>,
    /// Rows on the page, 1..=[`AUDIT_LIMIT_MAX`] (0 means the maximum).
    pub limit: u32,
}

/// One page of the operator audit in the order it was written (`wharf audit`). A page shorter
/// than the limit is the last.
pub async fn audit<'c>(
    executor: impl PgExecutor<'c>,
    filter: &AuditFilter,
) -> Result<Vec<AuditEntry>, Error> {
    if filter.limit > AUDIT_LIMIT_MAX {
        return Err(Error::Invalid {
            field: "limit",
            rule: format!("must be 1..={AUDIT_LIMIT_MAX}"),
        });
    }
    let limit = if filter.limit == 0 {
        AUDIT_LIMIT_MAX
    } else {
        filter.limit
    };
    Ok(
        store::operator::audit_list(executor, filter.action_id, filter.after_id, limit)
            .await?
            .into_iter()
            .map(|r| AuditEntry {
                audit_id: r.audit_id,
                operation: r.operation,
                action_id: r.action_id,
                actor: r.actor,
                role: r.role,
                target: r.target,
                detail: r.detail,
                correlation_id: r.correlation_id,
                recorded_at: r.recorded_at,
            })
            .collect(),
    )
}

fn resolution(row: store::operator::ResolutionRow) -> Result<Resolution, Error> {
    Ok(Resolution {
        resolution_id: row.resolution_id,
        action_id: row.action_id,
        finding: row
            .finding
            .parse()
            .map_err(|_| protocol(format!("unknown finding {:?}", row.finding)))?,
        note: row.note,
        actor: row.actor,
        resent_action_id: row.resent_action_id,
        correlation_id: row.correlation_id,
        recorded_at: row.recorded_at,
    })
}

fn parse_state(state: &str) -> Result<ActionState, Error> {
    state.parse().map_err(|e| protocol(format!("{e}")))
}

fn protocol(what: String) -> Error {
    Error::Database(sqlx::Error::Protocol(what))
}
