//! wharf's schema home: the migrations under `migrations/`, applied into the PostgreSQL schema
//! `wharf`, with sqlx's bookkeeping table inside that schema too.
//!
//! Must not know: what the tables are for. Each migration file belongs to the module that owns
//! its tables (the outbox, the inbox).

use sqlx::PgPool;
use sqlx::migrate::{MigrateError, Migrator};

/// The schema every wharf object lives in.
pub const SCHEMA: &str = "wharf";

/// sqlx's migration bookkeeping, kept inside wharf's own schema.
pub const MIGRATIONS_TABLE: &str = "wharf._sqlx_migrations";

/// The migrator for wharf's schema.
pub fn migrator() -> Migrator {
    let mut migrator = sqlx::migrate!("./migrations");
    migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
    migrator.create_schema(SCHEMA);
    migrator
}

/// Brings the database up to date. Safe to run from several processes at once: sqlx holds an
/// advisory lock while it migrates.
pub async fn run(pool: &PgPool) -> Result<(), MigrateError> {
    migrator().run(pool).await
}
