//! Tenants and bearer credentials: issuing a random token once, and authenticating a presented
//! token into a closed [`VerifiedIdentity`] (SPEC §3.4 step 2).
//!
//! Owns: the token format, its hashing, and the constant-time comparison. Must not know what the
//! identity is then used for (limits, routes, streams), nor anything about HTTP headers: the HTTP
//! layer strips `Bearer ` and hands over the token text.
//!
//! A token is `wharf_` followed by the unpadded base64url text of 32 random bytes (from the OS).
//! Only SHA-256 of those 32 bytes is stored. With 256 bits of entropy a plain hash is enough — a
//! slow password hash exists to protect guessable secrets, and would only make every ingest
//! request slower. The row is found by the hash's first 8 bytes and the full hash is compared
//! with [`subtle`], so no byte-by-byte comparison of secret-derived data happens in a B-tree.

use base64::Engine as _;
use chrono::{DateTime, Utc};
use rand::RngCore as _;
use sha2::{Digest as _, Sha256};
use sqlx::{PgExecutor, PgPool};
use subtle::ConstantTimeEq as _;

use super::error::Error;
use crate::core::envelope::is_identity;
use crate::store::inbox as store;

/// What every token starts with, so a leaked one is recognisable by secret scanners.
pub const TOKEN_PREFIX: &str = "wharf_";
/// Random bytes in a token.
pub const TOKEN_BYTES: usize = 32;
/// The longest token text accepted for parsing: the prefix and 43 base64url characters. Longer
/// input is refused before any decoding or hashing.
pub const TOKEN_CHARS_MAX: usize = 6 + 43;
/// Bytes of the hash used to find a credential row.
const LOOKUP_BYTES: usize = 8;

/// Who a request comes from, as proven by its credential. Closed: only [`authenticate`] makes
/// one (there is no public constructor), so a value of this type always means a live credential
/// was presented.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VerifiedIdentity {
    tenant: String,
    account: String,
    device: Option<String>,
}

impl VerifiedIdentity {
    /// The credential's tenant.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The credential's account.
    pub fn account(&self) -> &str {
        &self.account
    }

    /// The credential's device, when it names one.
    pub fn device(&self) -> Option<&str> {
        self.device.as_deref()
    }

    /// The stream producer this identity sends as: its device, or its account when it has none.
    /// Never a key id, so rotating keys keeps the stream.
    pub fn producer(&self) -> (&'static str, &str) {
        match &self.device {
            Some(device) => ("device", device),
            None => ("account", &self.account),
        }
    }

    /// For tests in this crate that need an identity without a database.
    #[cfg(test)]
    pub(crate) fn for_test(tenant: &str, account: &str, device: Option<&str>) -> VerifiedIdentity {
        VerifiedIdentity {
            tenant: tenant.into(),
            account: account.into(),
            device: device.map(Into::into),
        }
    }
}

/// A credential just issued. `token` is shown this once and never stored.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedCredential {
    /// The credential's id (for listing and revoking).
    pub credential_id: i64,
    /// The bearer token. Give it to the producer; wharf cannot show it again.
    pub token: String,
    /// Its tenant.
    pub tenant: String,
    /// Its account.
    pub account: String,
    /// Its device, when it names one.
    pub device: Option<String>,
    /// When it was issued.
    pub created_at: DateTime<Utc>,
}

impl std::fmt::Debug for IssuedCredential {
    // The token must not end up in a log by way of `{:?}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCredential")
            .field("credential_id", &self.credential_id)
            .field("token", &"<redacted>")
            .field("tenant", &self.tenant)
            .field("account", &self.account)
            .field("device", &self.device)
            .field("created_at", &self.created_at)
            .finish()
    }
}

pub use store::CredentialListRow as CredentialInfo;

/// The 32 token bytes of a well-formed token text, or `None`.
fn parse_token(token: &str) -> Option<[u8; TOKEN_BYTES]> {
    if token.len() > TOKEN_CHARS_MAX {
        return None;
    }
    let body = token.strip_prefix(TOKEN_PREFIX)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body)
        .ok()?;
    bytes.try_into().ok()
}

fn token_hash(bytes: &[u8; TOKEN_BYTES]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn check_identity(what: &'static str, value: &str) -> Result<(), Error> {
    if is_identity(value) {
        Ok(())
    } else {
        Err(Error::invalid(
            what,
            "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
        ))
    }
}

/// Whether a database error is a foreign-key violation (the tenant does not exist).
pub(crate) fn is_foreign_key_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("23503"))
}

/// Creates a tenant. Returns `true` when it was created, `false` when it already existed (so
/// provisioning scripts can run twice).
pub async fn create_tenant<'e>(ex: impl PgExecutor<'e>, tenant: &str) -> Result<bool, Error> {
    check_identity("tenant", tenant)?;
    Ok(store::tenant_insert(ex, tenant).await?)
}

/// Every tenant with its creation time.
pub async fn list_tenants<'e>(
    ex: impl PgExecutor<'e>,
) -> Result<Vec<(String, DateTime<Utc>)>, Error> {
    Ok(store::tenant_list(ex).await?)
}

/// Issues a credential for `account` (and `device`, when the producer is a device) in `tenant`.
/// The returned token is the only copy.
pub async fn issue_credential<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    account: &str,
    device: Option<&str>,
) -> Result<IssuedCredential, Error> {
    check_identity("tenant", tenant)?;
    check_identity("account", account)?;
    if let Some(device) = device {
        check_identity("device", device)?;
    }
    let mut bytes = [0u8; TOKEN_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let hash = token_hash(&bytes);
    let token = format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let (credential_id, created_at) =
        store::credential_insert(ex, tenant, account, device, &hash[..LOOKUP_BYTES], &hash)
            .await
            .map_err(|e| {
                if is_foreign_key_violation(&e) {
                    Error::NotFound { what: "tenant" }
                } else {
                    Error::Database(e)
                }
            })?;
    Ok(IssuedCredential {
        credential_id,
        token,
        tenant: tenant.to_owned(),
        account: account.to_owned(),
        device: device.map(str::to_owned),
        created_at,
    })
}

/// Revokes a credential of `tenant`; it stops authenticating at once.
pub async fn revoke_credential<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    credential_id: i64,
) -> Result<(), Error> {
    if store::credential_revoke(ex, tenant, credential_id).await? {
        Ok(())
    } else {
        Err(Error::NotFound {
            what: "live credential",
        })
    }
}

/// The credentials of `tenant` (never their tokens or hashes).
pub async fn list_credentials<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
) -> Result<Vec<CredentialInfo>, Error> {
    Ok(store::credential_list(ex, tenant).await?)
}

/// Authenticates a token. `Ok(None)` for anything that is not a live credential: malformed,
/// unknown and revoked look the same to the caller (and cost about the same), so a probe learns
/// nothing. `Err` only when the database failed.
pub async fn authenticate(
    pool: &PgPool,
    token: &str,
) -> Result<Option<VerifiedIdentity>, sqlx::Error> {
    let Some(hash) = token_digest(token) else {
        return Ok(None);
    };
    Ok(authenticate_digest(pool, &hash)
        .await?
        .map(|(_, identity)| identity))
}

/// SHA-256 of a well-formed token's bytes (what is stored), or `None` for a malformed token.
pub(crate) fn token_digest(token: &str) -> Option<[u8; 32]> {
    parse_token(token).map(|bytes| token_hash(&bytes))
}

/// [`authenticate`] from the token's digest, with the credential's id.
pub(crate) async fn authenticate_digest(
    pool: &PgPool,
    hash: &[u8; 32],
) -> Result<Option<(i64, VerifiedIdentity)>, sqlx::Error> {
    let candidates = store::credential_by_lookup(pool, &hash[..LOOKUP_BYTES]).await?;
    let mut found = None;
    // Every candidate is compared, matched or not, so the time spent does not depend on where
    // (or whether) the match is.
    for row in candidates {
        let equal: bool = row.token_sha256.as_slice().ct_eq(&hash[..]).into();
        if equal && !row.revoked {
            found = Some((
                row.credential_id,
                VerifiedIdentity {
                    tenant: row.tenant_id,
                    account: row.account_id,
                    device: row.device_id,
                },
            ));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_format() {
        let bytes = [7u8; TOKEN_BYTES];
        let token = format!(
            "{TOKEN_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        );
        assert_eq!(token.len(), TOKEN_CHARS_MAX);
        assert_eq!(parse_token(&token), Some(bytes));
        for bad in [
            "",
            "wharf_",
            "Bearer x",
            &token[TOKEN_PREFIX.len()..],
            &format!("{token}A"),
            &token.replace("wharf_", "wharg_"),
            &format!("{}=", &token[..token.len() - 1]),
        ] {
            assert_eq!(parse_token(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn producer_is_device_or_account() {
        let with = VerifiedIdentity::for_test("t", "a", Some("d"));
        assert_eq!(with.producer(), ("device", "d"));
        let without = VerifiedIdentity::for_test("t", "a", None);
        assert_eq!(without.producer(), ("account", "a"));
    }
}
