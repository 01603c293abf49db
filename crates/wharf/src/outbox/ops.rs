//! The outbox's calls for applications and operators: enqueue, admission, reading, erasure and
//! retention. Each takes the caller's connection or transaction first (STYLE §3).
//!
//! Owns: idempotency by key and digest, and [`ActionView`], the one shape of an action outside
//! the crate (the store decodes its rows into it; the HTTP API serializes it). Must
//! not know: adapters' behaviour or the executor.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{Acquire, PgConnection, PgExecutor, Postgres};
use wharf_core::action::{ActionState, StopReason};

use super::error::Error;
use super::kind::Registry;
use super::request::{ActionRequest, prepare};
use crate::store;

/// Most requests one `enqueue_many` call takes (one statement, so one bounded parameter set).
pub const ENQUEUE_BATCH_MAX: usize = 10_000;

/// Times enqueue re-reads a key that a concurrent transaction held and then rolled back.
const ENQUEUE_ROUNDS_MAX: usize = 3;

/// The action an enqueue stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    /// The action's id.
    pub id: i64,
    /// False when the key existed with the same content: the first action, unchanged.
    pub created: bool,
}

/// Records one effect in the caller's transaction: it exists exactly when that transaction
/// commits. Every field is checked first; a bad one is a typed error and nothing is written.
///
/// Same key and same content ⇒ the first action (`created: false`), unchanged; same key and
/// different content ⇒ [`Error::IdempotencyConflict`]. Concurrent identical enqueues both get the
/// one action's id (under READ COMMITTED, PostgreSQL's default).
///
/// ```no_run
/// # async fn example(pool: sqlx::PgPool, registry: wharf::outbox::Registry) -> Result<(), wharf::outbox::Error> {
/// use wharf::outbox::{enqueue, ActionRequest};
/// let mut tx = pool.begin().await?;
/// // ... the application's own change ...
/// let req = ActionRequest::new("email", "account:42", "welcome:42", serde_json::json!({"account": 42}))
///     .tenant("t1");
/// let action = enqueue(&mut tx, &registry, req).await?;
/// tx.commit().await?;
/// # let _ = action; Ok(()) }
/// ```
pub async fn enqueue(
    conn: &mut PgConnection,
    registry: &Registry,
    req: ActionRequest,
) -> Result<Enqueued, Error> {
    let mut out = enqueue_many(conn, registry, vec![req]).await?;
    Ok(out.remove(0))
}

/// Records many effects with one INSERT statement; the results are in request order. Each
/// request follows [`enqueue`]'s rules. A key that appears twice in one batch must carry the same
/// content both times (the second gets `created: false`).
///
/// On [`Error::IdempotencyConflict`] nothing of the batch is inserted, except when the
/// conflicting action was committed concurrently while this statement ran; roll back the
/// transaction on any error, as always.
pub async fn enqueue_many(
    conn: &mut PgConnection,
    registry: &Registry,
    reqs: Vec<ActionRequest>,
) -> Result<Vec<Enqueued>, Error> {
    if reqs.is_empty() {
        return Ok(Vec::new());
    }
    if reqs.len() > ENQUEUE_BATCH_MAX {
        return Err(Error::Invalid {
            field: "batch",
            rule: format!(
                "at most {ENQUEUE_BATCH_MAX} requests per call, got {}",
                reqs.len()
            ),
        });
    }
    let rows = reqs
        .iter()
        .map(|r| prepare(registry, r))
        .collect::<Result<Vec<_>, _>>()?;
    // One row per key goes to the database; a repeated key must repeat the content.
    let mut first_of_key: HashMap<&str, usize> = HashMap::new();
    let mut unique = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        match first_of_key.get(row.idempotency_key.as_str()) {
            Some(&j) if rows[j].content_digest != row.content_digest => {
                return Err(Error::Invalid {
                    field: "idempotency_key",
                    rule: format!("requests {j} and {i} share a key but not their content"),
                });
            }
            Some(_) => {}
            None => {
                first_of_key.insert(row.idempotency_key.as_str(), i);
                unique.push(row.clone());
            }
        }
    }
    let mut ids: HashMap<String, (i64, bool)> = HashMap::with_capacity(unique.len());
    let mut pending = unique;
    for _ in 0..ENQUEUE_ROUNDS_MAX {
        let inserted = store::outbox::insert_actions(conn, &pending, registry.notify()).await?;
        for row in inserted {
            ids.insert(row.idempotency_key, (row.id, true));
        }
        pending.retain(|r| !ids.contains_key(&r.idempotency_key));
        if pending.is_empty() {
            break;
        }
        let keys: Vec<&str> = pending.iter().map(|r| r.idempotency_key.as_str()).collect();
        let existing = store::outbox::find_by_keys(&mut *conn, &keys).await?;
        let wanted: HashMap<&str, &[u8]> = pending
            .iter()
            .map(|r| (r.idempotency_key.as_str(), r.content_digest.as_slice()))
            .collect();
        for found in existing {
            if wanted.get(found.idempotency_key.as_str()) != Some(&found.content_digest.as_slice())
            {
                return Err(Error::IdempotencyConflict {
                    key: found.idempotency_key,
                    existing_id: found.id,
                });
            }
            ids.insert(found.idempotency_key, (found.id, false));
        }
        // What is still missing was held by a transaction that rolled back: insert again.
        pending.retain(|r| !ids.contains_key(&r.idempotency_key));
        if pending.is_empty() {
            break;
        }
    }
    let mut seen: HashMap<&str, ()> = HashMap::with_capacity(rows.len());
    rows.iter()
        .map(|row| {
            let key = row.idempotency_key.as_str();
            let &(id, created) = ids.get(key).ok_or_else(|| {
                Error::Database(sqlx::Error::Protocol(format!(
                    "idempotency key {key:?} neither inserted nor found after {ENQUEUE_ROUNDS_MAX} rounds"
                )))
            })?;
            let first = seen.insert(key, ()).is_none();
            Ok(Enqueued { id, created: created && first })
        })
        .collect()
}

/// Admits a proposal (PROPOSED → ADMITTED). False when the action is not PROPOSED (already
/// decided, or unknown), so a repeated admit is harmless.
pub async fn admit<'c>(executor: impl PgExecutor<'c>, id: i64) -> Result<bool, Error> {
    Ok(store::outbox::admit(executor, id).await?)
}

/// Refuses a proposal (PROPOSED → CANCELLED / `REFUSED`). False when the action is not PROPOSED.
pub async fn refuse<'c>(executor: impl PgExecutor<'c>, id: i64) -> Result<bool, Error> {
    let refused = store::outbox::refuse(executor, id).await?;
    if let Some(kind) = &refused {
        // Counted when the statement ran; a caller's transaction that rolls back overcounts
        // by one, which a counter of ends can live with.
        super::metrics::ended(kind, id, ActionState::Cancelled, StopReason::Refused);
    }
    Ok(refused.is_some())
}

/// [`admit`], then the action as it is now, in the caller's transaction: the one call an
/// operator's "admit" makes. [`Error::NotFound`] when there is no such action;
/// [`Error::NotProposed`] when it was not PROPOSED (nothing changed).
pub async fn admit_proposal(conn: &mut PgConnection, id: i64) -> Result<ActionView, Error> {
    let changed = admit(&mut *conn, id).await?;
    proposal_decided(conn, id, changed, "admitted").await
}

/// [`refuse`], then the action as it is now, as [`admit_proposal`] does for an admit.
pub async fn refuse_proposal(conn: &mut PgConnection, id: i64) -> Result<ActionView, Error> {
    let changed = refuse(&mut *conn, id).await?;
    proposal_decided(conn, id, changed, "refused").await
}

/// After an admit or refuse: the action, or why it was not the proposal it was taken for.
async fn proposal_decided(
    conn: &mut PgConnection,
    id: i64,
    changed: bool,
    asked: &'static str,
) -> Result<ActionView, Error> {
    let view = get(&mut *conn, id).await?.ok_or(Error::NotFound(id))?;
    if !changed {
        return Err(Error::NotProposed {
            id,
            state: view.state,
            asked,
        });
    }
    Ok(view)
}

/// Deletes every action whose subject is `account` (erasure), in any state. A pending one never
/// runs; a claimed one's fence refuses and its result is dropped; a write that already passed
/// its fence still reaches the provider. Returns how many were deleted.
///
/// Takes a pool or a connection (the caller's transaction, `&mut *tx`): the live and the ended
/// actions are deleted by two statements, in a transaction of their own or in a savepoint of the
/// caller's.
pub async fn erase_subject<'a>(
    db: impl Acquire<'a, Database = Postgres>,
    account: &str,
) -> Result<u64, Error> {
    let mut tx = db.begin().await?;
    let deleted = store::outbox::erase_subject(&mut tx, account).await?;
    tx.commit().await?;
    Ok(deleted)
}

/// Retention: deletes at most `batch_max` actions that ended before `cutoff`, oldest first.
/// Call it until it returns less than `batch_max`; the executor does so on its own interval.
pub async fn delete_ended_before<'c>(
    executor: impl PgExecutor<'c>,
    cutoff: DateTime<Utc>,
    batch_max: u32,
) -> Result<u64, Error> {
    Ok(store::outbox::delete_ended(executor, cutoff, batch_max).await?)
}

/// One action as the outside sees it, and as the HTTP API answers it: its `Serialize` is the
/// API's `Action` JSON, which leaves out the fence's own columns (the digest, the kind's flags,
/// the lease and the write mark) and the payload once the action ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema),
    schema(
        as = Action,
        description = "An action as the API shows it. An ended action has no payload."
    )
)]
#[non_exhaustive]
pub struct ActionView {
    pub id: i64,
    pub kind: String,
    pub tenant_id: Option<String>,
    pub project_id: Option<String>,
    pub lane_key: String,
    pub idempotency_key: String,
    /// SHA-256 of the content, hex.
    #[serde(skip)]
    pub content_digest: String,
    #[serde(skip)]
    pub at_most_once: bool,
    #[serde(skip)]
    pub instance_level: bool,
    pub state: ActionState,
    /// Set exactly when the action ended.
    pub stop_reason: Option<StopReason>,
    pub epoch: i64,
    /// Attempts counted so far (deferrals excluded).
    pub attempt: u32,
    pub max_attempts: u32,
    /// Gone once the action ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    pub subject_account_id: Option<String>,
    pub run_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(skip)]
    pub lease_expires_at: Option<DateTime<Utc>>,
    #[serde(skip)]
    pub write_started_at: Option<DateTime<Utc>>,
    pub readback_ref: Option<String>,
    pub error_code: Option<String>,
    pub created_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
}

/// Reads one action. `None` when there is none with that id (never enqueued, erased, or
/// deleted by retention).
pub async fn get<'c>(executor: impl PgExecutor<'c>, id: i64) -> Result<Option<ActionView>, Error> {
    Ok(store::outbox::get(executor, id).await?)
}

/// Most actions one [`list`] page returns.
pub const LIST_LIMIT_MAX: u32 = 100;

/// What [`list`] returns: narrowing filters and a keyset cursor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListFilter {
    /// Only this state.
    pub state: Option<ActionState>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only this tenant.
    pub tenant_id: Option<String>,
    /// Only ids above this one: the last id of the previous page.
    pub after_id: Option<i64>,
    /// Rows on the page, 1..=[`LIST_LIMIT_MAX`] (0 means the maximum).
    pub limit: u32,
}

/// One page of actions in id order (operators: `wharf actions list`). Page on with the last
/// id as `after_id`; a page shorter than the limit is the last.
pub async fn list<'c>(
    executor: impl PgExecutor<'c>,
    filter: &ListFilter,
) -> Result<Vec<ActionView>, Error> {
    if filter.limit > LIST_LIMIT_MAX {
        return Err(Error::Invalid {
            field: "limit",
            rule: format!("must be 1..={LIST_LIMIT_MAX}"),
        });
    }
    let limit = if filter.limit == 0 {
        LIST_LIMIT_MAX
    } else {
        filter.limit
    };
    Ok(store::outbox::list(
        executor,
        filter.state.map(|s| s.as_str()),
        filter.kind.as_deref(),
        filter.tenant_id.as_deref(),
        filter.after_id,
        limit,
    )
    .await?)
}

/// How much due work waits for one kind ([`due`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct DueStats {
    /// The kind.
    pub kind: String,
    /// ADMITTED actions whose `run_at` has come (lane heads or not).
    pub due: i64,
    /// How long the oldest of them has been due, in seconds (0 when none is).
    pub oldest_due_s: f64,
}

/// The due depth and the oldest due age of every kind that has due work, as the executor's
/// gauges report them (`wharf_action_due_depth`, `wharf_action_oldest_due_age_seconds`).
/// Counts every due row: call it on a slow interval, not per request.
pub async fn due<'c>(executor: impl PgExecutor<'c>) -> Result<Vec<DueStats>, Error> {
    Ok(store::outbox::due_gauges(executor, None)
        .await?
        .into_iter()
        .map(|(kind, due, oldest)| DueStats {
            kind,
            due,
            oldest_due_s: oldest.max(0.0),
        })
        .collect())
}
