//! `wharf verify`: the invariants a restored (or suspect) database must hold, checked by
//! counting the rows that break each one. Run after every restore; it fails loudly.
//!
//! Owns: the list of checks. Each check is one `.sql` file under `sql/verify/` returning the
//! number of violating rows. Must not know: how to repair anything — a failed check is for a
//! person to look at, with the backup still in hand.

use sqlx::PgPool;

/// One invariant and how many rows break it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// A stable name (`action_without_key`, …).
    pub name: &'static str,
    /// What must hold, in a sentence.
    pub rule: &'static str,
    /// Rows that break it; 0 when it holds.
    pub violations: i64,
}

/// The result of every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Every check, in a fixed order.
    pub checks: Vec<Check>,
}

impl Report {
    /// Whether every invariant holds.
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.violations == 0)
    }

    /// The number of broken invariants.
    pub fn violations(&self) -> usize {
        self.checks.iter().filter(|c| c.violations != 0).count()
    }
}

const CHECKS: [(&str, &str, &str); 9] = [
    (
        "payload_without_identity",
        "every inbox payload has its permanent identity",
        include_str!("../../sql/verify/payload_without_identity.sql"),
    ),
    (
        "cursor_behind_identities",
        "no stream's cursor stops right before a retained identity",
        include_str!("../../sql/verify/cursor_behind_identities.sql"),
    ),
    (
        "cursor_without_identity",
        "every stream's cursor stands on an identity or an audited skip",
        include_str!("../../sql/verify/cursor_without_identity.sql"),
    ),
    (
        "identity_without_audit",
        "every accepted identity has its audit row",
        include_str!("../../sql/verify/identity_without_audit.sql"),
    ),
    (
        "action_live_and_ended",
        "no action is both live and ended",
        include_str!("../../sql/verify/action_live_and_ended.sql"),
    ),
    (
        "action_without_key",
        "every action has its idempotency key row, so its key stays refused to a second enqueue",
        include_str!("../../sql/verify/action_without_key.sql"),
    ),
    (
        "key_without_action",
        "every key row names an action that has it, so no key is refused for an action gone",
        include_str!("../../sql/verify/key_without_action.sql"),
    ),
    (
        "lane_executing_twice",
        "no lane has two executing actions",
        include_str!("../../sql/verify/lane_executing_twice.sql"),
    ),
    (
        "executing_without_lease",
        "every executing action has a claim (epoch, attempt) and a lease",
        include_str!("../../sql/verify/executing_without_lease.sql"),
    ),
];

/// Runs every check, in one repeatable-read snapshot so the counts agree with each other.
pub async fn run(pool: &PgPool) -> Result<Report, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query(include_str!("../../sql/verify/snapshot.sql"))
        .execute(&mut *tx)
        .await?;
    let mut checks = Vec::with_capacity(CHECKS.len());
    for (name, rule, sql) in CHECKS {
        let violations: i64 = sqlx::query_scalar(sql).fetch_one(&mut *tx).await?;
        checks.push(Check {
            name,
            rule,
            violations,
        });
    }
    tx.commit().await?;
    Ok(Report { checks })
}

/// Whether the database has a `wharf` schema at all.
pub async fn schema_exists(pool: &PgPool) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(include_str!("../../sql/verify/schema_exists.sql"))
        .fetch_one(pool)
        .await
}

/// Drops the `wharf` schema and everything in it (a restore with `--replace`).
pub async fn drop_schema(pool: &PgPool) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../sql/verify/drop_schema.sql"))
        .execute(pool)
        .await
        .map(|_| ())
}
