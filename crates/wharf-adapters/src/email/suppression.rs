//! The suppression list: addresses that receive no notice, whatever the notice.
//!
//! Owns: address normalisation and the digest that is stored, and the library calls
//! [`suppress`], [`unsuppress`] and [`is_suppressed`]. Must not know: notices or transports; the
//! adapter asks [`is_suppressed`] about every prepared recipient, at enqueue and before every
//! attempt.
//!
//! Addresses are compared case-insensitively (the whole address is lower-cased). RFC 5321 lets
//! a local part be case-sensitive, but no mainstream provider treats it so, and for an opt-out
//! list matching too much is the safe side: "Ada@Example.com" unsubscribing must stop mail to
//! "ada@example.com".

use lettre::Address;
use sha2::{Digest, Sha256};
use sqlx::PgExecutor;

use super::error::Error;
use super::store;

/// The stored digest of an address: SHA-256 of the lower-cased `local@domain`, behind a label
/// so it differs from any other hash of the same address.
pub(crate) fn digest(address: &str) -> Result<[u8; 32], Error> {
    let parsed: Address = address.trim().parse().map_err(|_| Error::InvalidAddress)?;
    let normal = format!("{}@{}", parsed.user(), parsed.domain()).to_lowercase();
    let mut hasher = Sha256::new();
    hasher.update(b"wharf.email.suppression\n");
    hasher.update(normal.as_bytes());
    Ok(hasher.finalize().into())
}

/// Puts an address on the suppression list (an unsubscribe, a complaint, a hard bounce), in
/// the caller's transaction. True when it was not listed yet. From the commit on, no attempt
/// of any notice to that address contacts the relay: it ends CANCELLED /
/// `recipient_suppressed`.
pub async fn suppress<'c>(executor: impl PgExecutor<'c>, address: &str) -> Result<bool, Error> {
    Ok(store::suppression_insert(executor, &digest(address)?).await?)
}

/// Takes an address off the suppression list (the person subscribed again). True when it was
/// listed.
pub async fn unsuppress<'c>(executor: impl PgExecutor<'c>, address: &str) -> Result<bool, Error> {
    Ok(store::suppression_delete(executor, &digest(address)?).await?)
}

/// Whether an address is on the suppression list.
pub async fn is_suppressed<'c>(
    executor: impl PgExecutor<'c>,
    address: &str,
) -> Result<bool, Error> {
    Ok(store::suppression_contains(executor, &digest(address)?).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_ignore_case_and_surrounding_space() {
        let a = digest("Ada@Example.COM").unwrap();
        assert_eq!(a, digest(" ada@example.com ").unwrap());
        assert_ne!(a, digest("ada@example.org").unwrap());
        assert!(matches!(digest("ada"), Err(Error::InvalidAddress)));
        assert!(matches!(digest(""), Err(Error::InvalidAddress)));
    }
}
