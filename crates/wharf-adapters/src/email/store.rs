//! The email module's SQL: one `.sql` file each under `sql/email/`, each called from one small
//! function here.
//!
//! Owns: statement text and parameter binding. Must not know: how an address is normalised or
//! hashed, or what a hit means ([`super::suppression`] decides both).

use sqlx::PgExecutor;

/// Adds a digest (`suppression_insert.sql`). True when it was not listed yet.
pub(crate) async fn suppression_insert<'c>(
    executor: impl PgExecutor<'c>,
    address_sha256: &[u8],
) -> Result<bool, sqlx::Error> {
    let row: Option<(bool,)> =
        sqlx::query_as(include_str!("../../sql/email/suppression_insert.sql"))
            .bind(address_sha256)
            .fetch_optional(executor)
            .await?;
    Ok(row.is_some())
}

/// Removes a digest (`suppression_delete.sql`). True when it was listed.
pub(crate) async fn suppression_delete<'c>(
    executor: impl PgExecutor<'c>,
    address_sha256: &[u8],
) -> Result<bool, sqlx::Error> {
    let row: Option<(Vec<u8>,)> =
        sqlx::query_as(include_str!("../../sql/email/suppression_delete.sql"))
            .bind(address_sha256)
            .fetch_optional(executor)
            .await?;
    Ok(row.is_some())
}

/// Whether a digest is listed (`suppression_contains.sql`).
pub(crate) async fn suppression_contains<'c>(
    executor: impl PgExecutor<'c>,
    address_sha256: &[u8],
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(include_str!("../../sql/email/suppression_contains.sql"))
        .bind(address_sha256)
        .fetch_one(executor)
        .await
}
