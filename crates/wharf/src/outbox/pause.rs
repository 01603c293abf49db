//! Pausing a kind, or a kind for one tenant: claims skip it until it is resumed, and nothing
//! that already runs is interrupted (an attempt in flight finishes and is recorded as usual).
//!
//! - [`pause`] / [`resume`]: one row of `wharf.kind_pause` written or removed, with one operator
//!   audit row, in the caller's transaction (a savepoint of it). Pausing what is paused, or
//!   resuming what is not, changes nothing and writes no audit.
//! - [`pauses`]: what is in force.
//!
//! How fast a pause takes effect: every executor reads the pauses before its claims, at most
//! [`PAUSE_REFRESH_MS`] old on the live path (`Executor::run`) and fresh on every call of
//! `run_once_at` and `drain`. A claim statement already sent when the pause commits may still
//! take that kind's actions; none sent after the refresh does. A kind-wide pause removes the
//! kind from the claim altogether, expired leases included (their reclaim is a new attempt); a
//! tenant's pause caps that tenant at 0 heads in the capped claim, whose reclaims of expired
//! leases are never capped, so a tenant-paused action whose holder died is still retried.
//!
//! Owns: which pauses are allowed, their bound, the audit's detail, and [`PauseSet`], the view
//! an executor claims under. Must not know: HTTP, the CLI, or how claims are written.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::{Acquire, PgConnection, PgExecutor};

use super::error::Error;
use super::kind::Registry;
use super::operator::{NOTE_BYTES_MAX, Operator};
use super::request::SCOPE_BYTES_MAX;
use crate::store;

/// Most pauses in force at once (kind-wide and per tenant together). Each tenant's pause
/// travels with every claim of its kind, so the bound keeps claims cheap.
pub const PAUSES_MAX: usize = 1_000;
/// How old, at most, the pauses an executor's live loop claims under may be.
pub const PAUSE_REFRESH_MS: u64 = 1_000;

/// One pause in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[non_exhaustive]
pub struct Pause {
    /// The paused kind.
    pub kind: String,
    /// The one tenant paused; `None`: every tenant of the kind.
    pub tenant_id: Option<String>,
    /// Why, as the operator wrote it (≤ 512 bytes).
    pub note: String,
    pub actor: String,
    pub correlation_id: String,
    pub paused_at: DateTime<Utc>,
}

/// What [`pause`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paused {
    /// The pause in force now.
    pub pause: Pause,
    /// False when it was in force already (then nothing was written).
    pub created: bool,
    /// The audit row written; `None` when nothing changed.
    pub audit_id: Option<i64>,
}

/// What [`resume`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// The pause that ended; `None` when there was none (then nothing was written).
    pub ended: Option<Pause>,
    /// The audit row written; `None` when nothing changed.
    pub audit_id: Option<i64>,
}

/// Pauses `kind` for every tenant (`tenant` `None`) or for one tenant, with one audit row, in
/// the caller's transaction (a savepoint of it; a bare connection gets its own). A tenant's
/// pause is its own row beside a kind-wide one: resuming the kind leaves it in force.
///
/// Refuses with nothing written: a kind no adapter is registered for
/// ([`Error::UnknownKind`]), a tenant or note out of bounds or a bad operator
/// ([`Error::Invalid`]), a new pause beyond [`PAUSES_MAX`] ([`Error::Invalid`] on `pauses`).
pub async fn pause(
    conn: &mut PgConnection,
    registry: &Registry,
    op: &Operator,
    kind: &str,
    tenant: Option<&str>,
    note: &str,
) -> Result<Paused, Error> {
    check(registry, op, kind, tenant)?;
    if note.len() > NOTE_BYTES_MAX || note.contains('\0') {
        return Err(Error::Invalid {
            field: "note",
            rule: format!("at most {NOTE_BYTES_MAX} bytes, no NUL"),
        });
    }
    let mut tx = conn.begin().await?;
    store::pause::lock(&mut *tx).await?;
    let in_force = store::pause::count(&mut *tx).await?;
    let row = store::pause::insert(&mut *tx, kind, tenant, note, &op.actor, &op.correlation_id)
        .await?
        // The lock above serializes pauses, so the insert either wrote or saw the row.
        .ok_or_else(|| protocol(format!("pause of {kind} neither written nor found")))?;
    if !row.created {
        return Ok(Paused {
            pause: from_row(row),
            created: false,
            audit_id: None,
        });
    }
    if in_force >= PAUSES_MAX as i64 {
        // Dropping the transaction rolls the insert back.
        return Err(Error::Invalid {
            field: "pauses",
            rule: format!("at most {PAUSES_MAX} pauses in force; resume one first"),
        });
    }
    let detail = json!({"kind": kind, "tenant_id": tenant});
    let audit_id = store::operator::audit_insert(
        &mut *tx,
        "pause",
        None,
        &op.actor,
        &detail,
        &op.correlation_id,
    )
    .await?;
    tx.commit().await?;
    Ok(Paused {
        pause: from_row(row),
        created: true,
        audit_id: Some(audit_id),
    })
}

/// Ends the pause of `kind` for every tenant (`tenant` `None`: the kind-wide pause only) or
/// for one tenant, with one audit row, in the caller's transaction (a savepoint of it).
/// Resuming what is not paused writes nothing. The executors claim the kind again after their
/// next refresh (see the module docs).
pub async fn resume(
    conn: &mut PgConnection,
    registry: &Registry,
    op: &Operator,
    kind: &str,
    tenant: Option<&str>,
) -> Result<Resumed, Error> {
    check(registry, op, kind, tenant)?;
    let mut tx = conn.begin().await?;
    store::pause::lock(&mut *tx).await?;
    let Some(row) = store::pause::delete(&mut *tx, kind, tenant).await? else {
        return Ok(Resumed {
            ended: None,
            audit_id: None,
        });
    };
    let detail = json!({"kind": kind, "tenant_id": tenant, "paused_at": row.paused_at});
    let audit_id = store::operator::audit_insert(
        &mut *tx,
        "resume",
        None,
        &op.actor,
        &detail,
        &op.correlation_id,
    )
    .await?;
    tx.commit().await?;
    Ok(Resumed {
        ended: Some(from_row(row)),
        audit_id: Some(audit_id),
    })
}

/// Every pause in force, by kind (the kind-wide pause before the tenants').
pub async fn pauses<'c>(executor: impl PgExecutor<'c>) -> Result<Vec<Pause>, Error> {
    Ok(store::pause::list(executor)
        .await?
        .into_iter()
        .map(from_row)
        .collect())
}

/// The pauses an executor claims under: kinds paused for everyone, and tenants paused per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PauseSet {
    kinds: BTreeSet<String>,
    tenants: BTreeMap<String, Vec<String>>,
}

impl PauseSet {
    pub(crate) fn new(pauses: &[Pause]) -> PauseSet {
        let mut set = PauseSet::default();
        for p in pauses {
            match &p.tenant_id {
                None => {
                    set.kinds.insert(p.kind.clone());
                }
                Some(t) => set
                    .tenants
                    .entry(p.kind.clone())
                    .or_default()
                    .push(t.clone()),
            }
        }
        set
    }

    /// Whether no tenant of `kind` may be claimed.
    pub(crate) fn kind_paused(&self, kind: &str) -> bool {
        self.kinds.contains(kind)
    }

    /// The tenants of `kind` that may not be claimed.
    pub(crate) fn tenants(&self, kind: &str) -> &[String] {
        self.tenants.get(kind).map_or(&[], Vec::as_slice)
    }

    /// Every (kind, tenant) in force, the kind-wide ones with tenant `None` (for the gauge).
    pub(crate) fn each(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        let kinds = self.kinds.iter().map(|k| (k.as_str(), None));
        let tenants = self
            .tenants
            .iter()
            .flat_map(|(k, ts)| ts.iter().map(move |t| (k.as_str(), Some(t.as_str()))));
        kinds.chain(tenants)
    }
}

fn check(
    registry: &Registry,
    op: &Operator,
    kind: &str,
    tenant: Option<&str>,
) -> Result<(), Error> {
    op.check()?;
    if registry.get(kind).is_none() {
        return Err(Error::UnknownKind(kind.to_owned()));
    }
    if let Some(t) = tenant
        && (t.is_empty() || t.len() > SCOPE_BYTES_MAX || t.contains('\0'))
    {
        return Err(Error::Invalid {
            field: "tenant_id",
            rule: format!("must be 1..={SCOPE_BYTES_MAX} bytes without NUL"),
        });
    }
    Ok(())
}

fn from_row(row: store::pause::PauseRow) -> Pause {
    Pause {
        kind: row.kind,
        tenant_id: row.tenant_id,
        note: row.note,
        actor: row.actor,
        correlation_id: row.correlation_id,
        paused_at: row.paused_at,
    }
}

fn protocol(what: String) -> Error {
    Error::Database(sqlx::Error::Protocol(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(kind: &str, tenant: Option<&str>) -> Pause {
        Pause {
            kind: kind.into(),
            tenant_id: tenant.map(Into::into),
            note: String::new(),
            actor: "a".into(),
            correlation_id: "c".into(),
            paused_at: Utc::now(),
        }
    }

    #[test]
    fn a_kind_wide_pause_and_tenant_pauses_are_kept_apart() {
        let set = PauseSet::new(&[
            p("email", None),
            p("webhook", Some("acme")),
            p("webhook", Some("globex")),
        ]);
        assert!(set.kind_paused("email"));
        assert!(!set.kind_paused("webhook"));
        assert_eq!(set.tenants("webhook"), ["acme", "globex"]);
        assert!(set.tenants("email").is_empty());
        assert!(set.tenants("noop").is_empty());
        let each: Vec<_> = set.each().collect();
        assert_eq!(
            each,
            [
                ("email", None),
                ("webhook", Some("acme")),
                ("webhook", Some("globex"))
            ]
        );
    }
}
