//! Who may read a tenant's outbound records — its dead letters and the public keys its
//! envelopes are signed with — besides the operator: a live credential of that tenant, never
//! another tenant's.
//!
//! Owns: that rule. Must not know: how the operator proved who they are (the HTTP layer checks
//! its token before asking here), or what is being read.

use super::error::Error;

/// What [`reader_of`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// A live credential of the tenant: it may read.
    OfTenant,
    /// No live credential has this token (unknown or revoked).
    Unknown,
    /// A live credential of another tenant: it may not read, and learns nothing more.
    OtherTenant,
}

/// Whether `token` may read `tenant`'s outbound records. Only reads: a database error commits
/// nothing.
pub async fn reader_of(pool: &sqlx::PgPool, token: &str, tenant: &str) -> Result<Reader, Error> {
    let identity = crate::inbox::authenticate(pool, token).await?;
    Ok(match identity {
        None => Reader::Unknown,
        Some(identity) if identity.tenant() == tenant => Reader::OfTenant,
        Some(_) => Reader::OtherTenant,
    })
}
