//! Verification keys per (tenant, project): generate, add, retire, revoke, list, and the rule for
//! whether a stored key may verify right now ([`key_usable`], pure).
//!
//! Owns: key administration and key state. Must not know how a signature is checked (that is
//! `wharf_core::sign`) or what happens after verification.
//!
//! Rotation (SPEC §3.7): add a new key id, move producers to it, retire the old one. A retired
//! key keeps verifying for its replay window, counted from when it was retired, so envelopes
//! signed just before the switch and retried later still verify. A revoked key (compromise)
//! stops verifying at once. The server stores only public keys; [`generate_key`] hands the
//! private seed to the caller and forgets it.

use std::time::Duration;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use ed25519_dalek::{SigningKey, VerifyingKey};
use rand::RngCore as _;
use sqlx::PgExecutor;

use super::credentials::is_foreign_key_violation;
use super::error::InboxError;
use crate::core::envelope::{KEY_ID_BYTES_MAX, is_identity};
use crate::store::inbox as store;

/// The default replay window of a key: how long it keeps verifying after it is retired. 90 days,
/// the same as payload retention, because a producer may legitimately retry an envelope for as
/// long as the inbox would still recognise it.
pub const KEY_REPLAY_WINDOW_DEFAULT_S: u64 = 90 * 24 * 3600;

/// A stored key, as listed.
pub type KeyInfo = store::KeyRow;

/// Whether a stored key may verify at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// Active, or retired and still inside its replay window.
    Usable,
    /// Revoked: never verifies again.
    Revoked,
    /// Retired and past its replay window.
    RetiredPastWindow,
}

/// Whether a key in `state` (retired at `retired_at`, with `replay_window_s`) verifies at `now`.
/// `now` is the database clock, the same clock that wrote `retired_at`. An unknown state (a
/// newer schema) is treated as revoked: refusing is the safe side.
pub fn key_usable(
    state: &str,
    retired_at: Option<DateTime<Utc>>,
    replay_window_s: i64,
    now: DateTime<Utc>,
) -> KeyUse {
    match (state, retired_at) {
        ("active", _) => KeyUse::Usable,
        ("retired", Some(retired_at)) => {
            let window = chrono::Duration::seconds(replay_window_s.max(0));
            if now < retired_at + window {
                KeyUse::Usable
            } else {
                KeyUse::RetiredPastWindow
            }
        }
        _ => KeyUse::Revoked,
    }
}

/// A key pair just generated. `private_seed` is the only copy; the server kept the public key.
#[derive(Clone, PartialEq, Eq)]
pub struct GeneratedKey {
    /// The key id envelopes must name.
    pub key_id: String,
    /// The Ed25519 public key (what the server stored).
    pub public_key: [u8; 32],
    /// The Ed25519 private seed, for the producer.
    pub private_seed: [u8; 32],
}

impl GeneratedKey {
    /// The seed as standard base64 (what `wharf send --key` reads).
    pub fn private_seed_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.private_seed)
    }

    /// The public key as standard base64.
    pub fn public_key_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.public_key)
    }
}

impl std::fmt::Debug for GeneratedKey {
    // The seed must not end up in a log by way of `{:?}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedKey")
            .field("key_id", &self.key_id)
            .field("public_key", &self.public_key_base64())
            .field("private_seed", &"<redacted>")
            .finish()
    }
}

/// A 32-byte key (public key or private seed) from its standard base64 text, as `wharf key`
/// prints and reads them.
pub fn key_from_base64(text: &str) -> Result<[u8; 32], InboxError> {
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| InboxError::invalid("key", "must be standard base64 of 32 bytes"))
}

/// The standard base64 text of a key.
pub fn key_to_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn check_scope(tenant: &str, project: &str) -> Result<(), InboxError> {
    for (what, value) in [("tenant", tenant), ("project", project)] {
        if !is_identity(value) {
            return Err(InboxError::invalid(
                what,
                "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
            ));
        }
    }
    Ok(())
}

fn check_key_id(key_id: &str) -> Result<(), InboxError> {
    if key_id.is_empty() || key_id.len() > KEY_ID_BYTES_MAX || key_id.chars().any(char::is_control)
    {
        return Err(InboxError::invalid(
            "key id",
            format!("must be 1..={KEY_ID_BYTES_MAX} bytes without control characters"),
        ));
    }
    Ok(())
}

fn window_s(replay_window: Duration) -> Result<i64, InboxError> {
    i64::try_from(replay_window.as_secs())
        .map_err(|_| InboxError::invalid("replay window", "too long"))
}

/// A fresh key id: `k` and 16 random hex digits. Random rather than a counter so two operators
/// generating at once never collide.
fn new_key_id() -> String {
    let mut bytes = [0u8; 8];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("k{}", hex::encode(bytes))
}

/// Adds a public key under `key_id` in (tenant, project).
pub async fn add_key<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    key_id: &str,
    public_key: &[u8],
    replay_window: Duration,
) -> Result<(), InboxError> {
    check_scope(tenant, project)?;
    check_key_id(key_id)?;
    let bytes: [u8; 32] = public_key
        .try_into()
        .map_err(|_| InboxError::invalid("public key", "must be 32 bytes"))?;
    let key = VerifyingKey::from_bytes(&bytes)
        .map_err(|_| InboxError::invalid("public key", "not an Ed25519 point"))?;
    if key.is_weak() {
        // verify_strict refuses small-order keys anyway; refusing them here tells the operator
        // instead of failing every envelope later.
        return Err(InboxError::invalid("public key", "small-order (weak) key"));
    }
    let added = store::key_insert(
        ex,
        tenant,
        project,
        key_id,
        &bytes,
        window_s(replay_window)?,
    )
    .await
    .map_err(|e| {
        if is_foreign_key_violation(&e) {
            InboxError::NotFound { what: "tenant" }
        } else {
            InboxError::Database(e)
        }
    })?;
    if added {
        Ok(())
    } else {
        Err(InboxError::Conflict(format!(
            "key id {key_id:?} already exists in {tenant}/{project}"
        )))
    }
}

/// Generates a key pair, stores its public half under `key_id` (a fresh id when `None`) and
/// returns both halves.
pub async fn generate_key<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    key_id: Option<&str>,
    replay_window: Duration,
) -> Result<GeneratedKey, InboxError> {
    let key_id = key_id.map_or_else(new_key_id, str::to_owned);
    let signing = SigningKey::generate(&mut rand::rngs::OsRng);
    let public_key = signing.verifying_key().to_bytes();
    add_key(ex, tenant, project, &key_id, &public_key, replay_window).await?;
    Ok(GeneratedKey {
        key_id,
        public_key,
        private_seed: signing.to_bytes(),
    })
}

/// Retires an active key: it keeps verifying for its replay window.
pub async fn retire_key<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    key_id: &str,
) -> Result<(), InboxError> {
    if store::key_retire(ex, tenant, project, key_id).await? {
        Ok(())
    } else {
        Err(InboxError::NotFound { what: "active key" })
    }
}

/// Revokes an active or retired key: it stops verifying at once.
pub async fn revoke_key<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    key_id: &str,
) -> Result<(), InboxError> {
    if store::key_revoke(ex, tenant, project, key_id).await? {
        Ok(())
    } else {
        Err(InboxError::NotFound {
            what: "active or retired key",
        })
    }
}

/// The keys of `tenant` (of one project when given).
pub async fn list_keys<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: Option<&str>,
) -> Result<Vec<KeyInfo>, InboxError> {
    Ok(store::key_list(ex, tenant, project).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_keys_round_trip() {
        let text = key_to_base64(&[9; 32]);
        assert_eq!(key_from_base64(&format!(" {text}\n")).unwrap(), [9; 32]);
        assert!(key_from_base64(&key_to_base64(&[9; 31])).is_err());
        assert!(key_from_base64("not base64").is_err());
    }

    #[test]
    fn key_use_by_state_and_window() {
        let t0 = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let s = chrono::Duration::seconds;
        let check = |state, retired: Option<i64>, window, now: i64, expected| {
            assert_eq!(
                key_usable(state, retired.map(|r| t0 + s(r)), window, t0 + s(now)),
                expected,
                "{state} retired {retired:?} window {window} now {now}"
            );
        };
        check("active", None, 10, 0, KeyUse::Usable);
        check("retired", Some(0), 10, 9, KeyUse::Usable);
        check("retired", Some(0), 10, 10, KeyUse::RetiredPastWindow);
        check("retired", Some(0), 0, 0, KeyUse::RetiredPastWindow);
        check("revoked", Some(0), 10, 1, KeyUse::Revoked);
        check("revoked", None, 10, 1, KeyUse::Revoked);
        check("something-new", None, 10, 1, KeyUse::Revoked);
    }
}
