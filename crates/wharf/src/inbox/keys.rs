//! Verification keys per (tenant, project): generate, add, retire, revoke, remove, list, and the
//! rule for whether a stored key may verify right now ([`key_usable`], pure).
//!
//! Owns: key administration and key state. Must not know how a signature is checked (that is
//! `wharf_core::sign`) or what happens after verification.
//!
//! Rotation (SPEC §3.7): add a new key id, move producers to it, retire the old one. A retired
//! key keeps verifying for its replay window, counted from when it was retired, so envelopes
//! signed just before the switch and retried later still verify. A revoked key (compromise)
//! stops verifying at once. The server stores only public keys; [`generate_key`] hands the
//! private seed to the caller and forgets it.
//!
//! Removal ends the lifecycle (retire → revoke → remove): [`remove_key`] deletes a revoked key
//! only when none of the envelopes it accepted can be replayed — each is below its stream's
//! replay floor, or its payload expired and the key's replay window has passed since it was
//! accepted — and audits it; otherwise it says what still depends on the key.
//! [`remove_safe_keys`] does it for every key that qualifies (`wharf serve`'s housekeeping).

use std::time::Duration;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use ed25519_dalek::{SigningKey, VerifyingKey};
use rand::RngCore as _;
use sqlx::{Acquire, PgConnection, PgExecutor};

use super::credentials::is_foreign_key_violation;
use super::error::Error;
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
pub fn key_from_base64(text: &str) -> Result<[u8; 32], Error> {
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| Error::invalid("key", "must be standard base64 of 32 bytes"))
}

/// The standard base64 text of a key.
pub fn key_to_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn check_scope(tenant: &str, project: &str) -> Result<(), Error> {
    for (what, value) in [("tenant", tenant), ("project", project)] {
        if !is_identity(value) {
            return Err(Error::invalid(
                what,
                "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$",
            ));
        }
    }
    Ok(())
}

fn check_key_id(key_id: &str) -> Result<(), Error> {
    if key_id.is_empty() || key_id.len() > KEY_ID_BYTES_MAX || key_id.chars().any(char::is_control)
    {
        return Err(Error::invalid(
            "key id",
            format!("must be 1..={KEY_ID_BYTES_MAX} bytes without control characters"),
        ));
    }
    Ok(())
}

fn window_s(replay_window: Duration) -> Result<i64, Error> {
    i64::try_from(replay_window.as_secs()).map_err(|_| Error::invalid("replay window", "too long"))
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
) -> Result<(), Error> {
    check_scope(tenant, project)?;
    check_key_id(key_id)?;
    let bytes: [u8; 32] = public_key
        .try_into()
        .map_err(|_| Error::invalid("public key", "must be 32 bytes"))?;
    let key = VerifyingKey::from_bytes(&bytes)
        .map_err(|_| Error::invalid("public key", "not an Ed25519 point"))?;
    if key.is_weak() {
        // verify_strict refuses small-order keys anyway; refusing them here tells the operator
        // instead of failing every envelope later.
        return Err(Error::invalid("public key", "small-order (weak) key"));
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
            Error::NotFound { what: "tenant" }
        } else {
            Error::Database(e)
        }
    })?;
    if added {
        Ok(())
    } else {
        Err(Error::Conflict(format!(
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
) -> Result<GeneratedKey, Error> {
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
) -> Result<(), Error> {
    if store::key_retire(ex, tenant, project, key_id).await? {
        Ok(())
    } else {
        Err(Error::NotFound { what: "active key" })
    }
}

/// Revokes an active or retired key: it stops verifying at once.
pub async fn revoke_key<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    key_id: &str,
) -> Result<(), Error> {
    if store::key_revoke(ex, tenant, project, key_id).await? {
        Ok(())
    } else {
        Err(Error::NotFound {
            what: "active or retired key",
        })
    }
}

/// Most keys one [`remove_safe_keys`] call removes.
pub const KEY_REMOVALS_PER_RUN_MAX: usize = 100;

/// Deletes a revoked key when nothing it signed can still be replayed (see the module docs),
/// with one audit row (`key-remove`, the operator and reason), in the caller's transaction (a
/// savepoint of it). Refuses with nothing changed: no such key ([`Error::NotFound`]); an
/// active or retired key, or envelopes that still depend on it ([`Error::Conflict`],
/// saying which step comes first or how many envelopes in how many streams); a bad operator
/// or reason ([`Error::Invalid`]).
pub async fn remove_key(
    conn: &mut PgConnection,
    tenant: &str,
    project: &str,
    key_id: &str,
    operator: &str,
    reason: &str,
) -> Result<(), Error> {
    super::streams::check_operator(operator, reason)?;
    let mut tx = conn.begin().await?;
    let (state, window_s) = store::key_lock(&mut *tx, tenant, project, key_id)
        .await?
        .ok_or(Error::NotFound { what: "key" })?;
    match state.as_str() {
        "revoked" => {}
        "active" => {
            return Err(Error::Conflict(format!(
                "key {key_id} is active: move its producers to another key, retire it (it keeps \
                 verifying for its replay window), revoke it, then remove it"
            )));
        }
        _ => {
            return Err(Error::Conflict(format!(
                "key {key_id} is retired, not revoked: revoke it first (it stops verifying at \
                 once), then remove it"
            )));
        }
    }
    let left = store::key_replayable(&mut *tx, tenant, project, key_id, window_s).await?;
    if left.envelopes > 0 {
        let until = left
            .newest_accepted_at
            .map(|at| at + chrono::Duration::seconds(window_s))
            .map_or_else(String::new, |t| {
                format!(
                    ", and the replay window of the newest ends {}",
                    t.to_rfc3339()
                )
            });
        return Err(Error::Conflict(format!(
            "key {key_id} signed {} envelope(s) in {} stream(s) that can still be replayed: \
             they stop depending on it when their streams' replay floors pass them (`wharf \
             streams advance-floor`), or when their payloads have expired and the key's replay \
             window has passed since they were accepted{until}",
            left.envelopes, left.streams
        )));
    }
    if !store::key_delete(&mut *tx, tenant, project, key_id).await? {
        return Err(Error::NotFound {
            what: "revoked key",
        });
    }
    store::audit_insert_key(
        &mut *tx,
        tenant,
        project,
        operator,
        key_id,
        reason,
        &super::new_correlation_id(),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Removes up to [`KEY_REMOVALS_PER_RUN_MAX`] revoked keys that nothing replayable depends on,
/// each as [`remove_key`] does (audited as `operator`), and returns them as (tenant, project,
/// key id). A key that gained a dependant since it was found is left for the next run.
pub async fn remove_safe_keys(
    pool: &sqlx::PgPool,
    operator: &str,
) -> Result<Vec<(String, String, String)>, Error> {
    let found = store::keys_removable(pool, KEY_REMOVALS_PER_RUN_MAX as i64).await?;
    let mut removed = Vec::with_capacity(found.len());
    let mut conn = pool.acquire().await?;
    for (tenant, project, key_id) in found {
        match remove_key(
            &mut conn,
            &tenant,
            &project,
            &key_id,
            operator,
            "revoked, and nothing it signed can be replayed",
        )
        .await
        {
            Ok(()) => removed.push((tenant, project, key_id)),
            Err(Error::Conflict(_) | Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// The keys of `tenant` (of one project when given).
pub async fn list_keys<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: Option<&str>,
) -> Result<Vec<KeyInfo>, Error> {
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
