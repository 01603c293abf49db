//! Inbox statements: one `.sql` file under `sql/inbox/` each, one small function each.
//!
//! Owns: the SQL text and the translation between Rust values and columns (u64 sequences travel
//! as text because the table holds them as `numeric(20,0)`; PostgreSQL's bigint is too narrow).
//!
//! Must not know: what a decision is, when a key may verify, or which outcome applies. Every
//! function takes the caller's executor first (a transaction when the write must be atomic with
//! others) and values the [`crate::inbox`] module already decided.

mod audit;
mod credentials;
mod group;
mod keys;
mod streams;

pub use audit::*;
pub use credentials::*;
pub use group::*;
pub use keys::*;
pub use streams::*;

/// The stream key as the store sees it.
#[derive(Debug, Clone, Copy)]
pub struct StreamKey<'a> {
    /// The tenant.
    pub tenant_id: &'a str,
    /// The project.
    pub project_id: &'a str,
    /// `device` or `account`.
    pub producer_kind: &'a str,
    /// The device or account id.
    pub producer_id: &'a str,
}

/// A sequence as the database spells it (`numeric(20,0)` as text).
fn seq(text: &str) -> Result<u64, sqlx::Error> {
    text.parse()
        .map_err(|e| sqlx::Error::Decode(format!("sequence {text:?} is not a u64: {e}").into()))
}
