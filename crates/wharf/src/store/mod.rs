//! Every SQL statement wharf runs, one `.sql` file each under `sql/`, loaded with `include_str!`
//! and called from one small function here. Nothing outside this module writes SQL.
//!
//! Must not know: business rules. Functions here take decided values and return rows; the
//! outbox and inbox modules decide (with `wharf-core`) what to write.

pub mod console;
pub mod inbox;
pub mod operator;
pub mod outbound;
pub mod outbox;
pub mod pause;
pub mod verify;

/// Whether the database answers a trivial query (`/readyz`).
pub async fn ping(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../../sql/ping.sql"))
        .execute(pool)
        .await
        .map(|_| ())
}
