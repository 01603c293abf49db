//! The server's own signing keys for outbound envelopes: the server key that seals them, the
//! [`SigningKeySource`] that hands the current one to [`emit_envelope`](super::emit_envelope),
//! and rotation.
//!
//! Owns: [`ServerKey`], the sealed format (pure [`seal_signing_key`] / [`open_signing_key`]),
//! [`SealedKeySource`] and the key calls. Must not know: where the server key file lives or
//! how it is created on disk (the CLI's job), how envelopes are built, or the receiving side's
//! verification keys (the inbox's).
//!
//! # Scope
//!
//! One current key per (tenant, project): exactly the scope a receiving wharf files a public key
//! under (`wharf key add`, i.e. `inbox::add_key`), so a key id means the same thing on both
//! ends, and a leaked key of one project signs nothing for another.
//!
//! # Sealing
//!
//! A private key (its 32-byte Ed25519 seed) is stored only sealed with ChaCha20-Poly1305 under
//! the 32-byte server key, with a fresh random 96-bit nonce per seal. The associated data binds
//! the seal to its tenant, project, key id and public key, so a sealed key copied to another
//! row does not open there ([`Error::SealBroken`]). The row also records the server key's
//! fingerprint, so a changed server key is reported as that ([`Error::ServerKeyMismatch`]).
//! Random nonces are safe here because a server key seals one key per rotation: far below the
//! 2^32 seals at which 96-bit random nonces start to risk a collision.
//!
//! # Rotation
//!
//! [`generate_signing_key`] makes a new key current and retires the old one in one statement.
//! A retired key is kept and listed: its public half still verifies what it signed, and the
//! receiver keeps accepting it for its replay window after the receiver's operator retires it.

use async_trait::async_trait;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use ed25519_dalek::SigningKey;
use rand::RngCore as _;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgExecutor};

use super::error::Error;
use super::scope::{Scope, check_scope};
use crate::store::outbound as store;

/// Length of a server key, in bytes.
pub const SERVER_KEY_BYTES: usize = 32;
/// Length of a server key's fingerprint, in bytes.
pub const SERVER_KEY_FINGERPRINT_BYTES: usize = 8;
/// Length of a sealed private key: version (1), nonce (12), sealed seed (32), tag (16).
pub const SEALED_KEY_BYTES: usize = 1 + NONCE_LEN + 32 + 16;
/// The sealed format's version byte, so a later format can sit beside this one.
const SEAL_VERSION: u8 = 1;
/// Domain separation for the associated data and the fingerprint.
const SEAL_CONTEXT: &[u8] = b"wharf.outbound.signing-key.v1";
const FINGERPRINT_CONTEXT: &[u8] = b"wharf.server-key.fingerprint.v1";

/// The server key: 32 random bytes that seal every signing key at rest.
///
/// Configured as standard base64 (the CLI generates `<data-dir>/server.key`, mode 0600, when it
/// is absent). Losing it makes every sealed signing key unusable: rotate all scopes after
/// configuring a new one. Its bytes are wiped on drop and never printed.
#[derive(Clone)]
pub struct ServerKey {
    bytes: [u8; SERVER_KEY_BYTES],
}

impl ServerKey {
    /// A fresh random server key from the operating system's generator.
    pub fn generate() -> ServerKey {
        let mut bytes = [0u8; SERVER_KEY_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        ServerKey { bytes }
    }

    /// The key from its 32 bytes.
    pub fn from_bytes(bytes: [u8; SERVER_KEY_BYTES]) -> ServerKey {
        ServerKey { bytes }
    }

    /// The key from standard base64 of exactly 32 bytes. Surrounding whitespace (a file's
    /// trailing newline) is ignored.
    pub fn from_base64(text: &str) -> Result<ServerKey, Error> {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(text.trim().as_bytes())
            .map_err(|_| Error::invalid("server key", "must be standard base64"))?;
        let bytes: [u8; SERVER_KEY_BYTES] = decoded.try_into().map_err(|_| {
            Error::invalid(
                "server key",
                format!("must be exactly {SERVER_KEY_BYTES} bytes"),
            )
        })?;
        Ok(ServerKey { bytes })
    }

    /// The key as standard base64 (what the CLI writes to `server.key`).
    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.bytes)
    }

    /// A short public name for the key: the first 8 bytes of a domain-separated SHA-256 of
    /// it. Stored beside every seal, so a wrong server key is told apart from tampering.
    pub fn fingerprint(&self) -> [u8; SERVER_KEY_FINGERPRINT_BYTES] {
        let digest = Sha256::new()
            .chain_update(FINGERPRINT_CONTEXT)
            .chain_update(self.bytes)
            .finalize();
        let mut out = [0u8; SERVER_KEY_FINGERPRINT_BYTES];
        out.copy_from_slice(&digest[..SERVER_KEY_FINGERPRINT_BYTES]);
        out
    }

    fn aead(&self) -> LessSafeKey {
        // 32 bytes is exactly ChaCha20-Poly1305's key length, so this cannot fail.
        LessSafeKey::new(
            UnboundKey::new(&CHACHA20_POLY1305, &self.bytes).expect("a 32-byte ChaCha20 key"),
        )
    }
}

impl Drop for ServerKey {
    fn drop(&mut self) {
        for b in &mut self.bytes {
            // Volatile so the compiler cannot drop the wipe of memory about to be freed.
            // SAFETY: `b` is a valid, aligned, exclusive reference to a u8.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

impl std::fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerKey")
            .field("fingerprint", &hex::encode(self.fingerprint()))
            .finish_non_exhaustive()
    }
}

/// The associated data of a seal: every field length-prefixed, so no two scopes share one.
fn seal_aad(tenant: &str, project: &str, key_id: &str, public_key: &[u8; 32]) -> Vec<u8> {
    let mut aad = Vec::with_capacity(SEAL_CONTEXT.len() + 4 * 8 + 300);
    aad.extend_from_slice(SEAL_CONTEXT);
    for part in [
        tenant.as_bytes(),
        project.as_bytes(),
        key_id.as_bytes(),
        public_key,
    ] {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part);
    }
    aad
}

/// Seals `key`'s seed under `server_key` for (tenant, project, key id). Pure apart from the
/// random nonce.
pub fn seal_signing_key(
    server_key: &ServerKey,
    tenant: &str,
    project: &str,
    key_id: &str,
    key: &SigningKey,
) -> Vec<u8> {
    let public_key = key.verifying_key().to_bytes();
    let mut nonce = [0u8; NONCE_LEN];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    let aad = seal_aad(tenant, project, key_id, &public_key);
    let mut body = key.to_bytes().to_vec();
    server_key
        .aead()
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad.as_slice()),
            &mut body,
        )
        // Sealing fails only for inputs near 256 GiB.
        .expect("sealing 32 bytes cannot fail");
    let mut sealed = Vec::with_capacity(SEALED_KEY_BYTES);
    sealed.push(SEAL_VERSION);
    sealed.extend_from_slice(&nonce);
    sealed.extend_from_slice(&body);
    sealed
}

/// Opens a sealed seed for (tenant, project, key id, public key) under `server_key`.
///
/// [`Error::SealBroken`] when the seal was altered, made under another server key, or belongs
/// to another row; [`Error::Corrupt`] when it is not this format at all.
pub fn open_signing_key(
    server_key: &ServerKey,
    tenant: &str,
    project: &str,
    key_id: &str,
    public_key: &[u8; 32],
    sealed: &[u8],
) -> Result<SigningKey, Error> {
    if sealed.len() != SEALED_KEY_BYTES || sealed[0] != SEAL_VERSION {
        return Err(Error::Corrupt(format!(
            "sealed key {key_id:?} is not a version-{SEAL_VERSION} seal of {SEALED_KEY_BYTES} bytes"
        )));
    }
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&sealed[1..1 + NONCE_LEN]);
    let mut body = sealed[1 + NONCE_LEN..].to_vec();
    let aad = seal_aad(tenant, project, key_id, public_key);
    let broken = || Error::SealBroken {
        key_id: key_id.to_owned(),
    };
    let opened = server_key
        .aead()
        .open_in_place(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad.as_slice()),
            &mut body,
        )
        .map_err(|_| broken())?;
    let seed: [u8; 32] = (&*opened).try_into().map_err(|_| broken())?;
    body.fill(0);
    let key = SigningKey::from_bytes(&seed);
    // The associated data already binds the public key; checking it again costs one scalar
    // multiplication and turns a wrong public column into a refusal instead of bad signatures.
    if key.verifying_key().to_bytes() != *public_key {
        return Err(broken());
    }
    Ok(key)
}

/// The key an envelope is signed with: its id and the private key. Never printed.
pub struct CurrentKey {
    /// The key id the envelope names (`integrity.key_id`).
    pub key_id: String,
    /// The Ed25519 private key.
    pub key: SigningKey,
}

impl std::fmt::Debug for CurrentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CurrentKey")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// Where [`emit_envelope`](super::emit_envelope) gets the current signing key of a scope.
///
/// The deployment injects one: [`SealedKeySource`] (sealed keys in wharf's own tables) is the
/// default; a source backed by a KMS or an HSM implements this trait and ignores `conn`.
///
/// `conn` is the emitting transaction's connection, so a database-backed source reads in the
/// same transaction (a key generated earlier in it is visible) and never needs a second pool
/// connection while the caller holds one.
#[async_trait]
pub trait SigningKeySource: Send + Sync {
    /// The current key of `scope`. [`Error::NoSigningKey`] when it has none.
    async fn current(&self, conn: &mut PgConnection, scope: &Scope) -> Result<CurrentKey, Error>;
}

/// The built-in [`SigningKeySource`]: the scope's active key from `wharf.outbound_signing_keys`,
/// opened under the server key.
#[derive(Debug, Clone)]
pub struct SealedKeySource {
    server_key: ServerKey,
}

impl SealedKeySource {
    /// A source that opens keys with `server_key`.
    pub fn new(server_key: ServerKey) -> SealedKeySource {
        SealedKeySource { server_key }
    }
}

#[async_trait]
impl SigningKeySource for SealedKeySource {
    async fn current(&self, conn: &mut PgConnection, scope: &Scope) -> Result<CurrentKey, Error> {
        scope.validate()?;
        let row = store::signing_key_current(conn, &scope.tenant, &scope.project)
            .await?
            .ok_or_else(|| Error::NoSigningKey {
                tenant: scope.tenant.clone(),
                project: scope.project.clone(),
            })?;
        if row.sealed_by != self.server_key.fingerprint() {
            return Err(Error::ServerKeyMismatch { key_id: row.key_id });
        }
        let public_key: [u8; 32] = row.public_key.as_slice().try_into().map_err(|_| {
            Error::Corrupt(format!("public key of {:?} is not 32 bytes", row.key_id))
        })?;
        let key = open_signing_key(
            &self.server_key,
            &scope.tenant,
            &scope.project,
            &row.key_id,
            &public_key,
            &row.sealed_private_key,
        )?;
        Ok(CurrentKey {
            key_id: row.key_id,
            key,
        })
    }
}

/// Whether a signing key is the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// The scope's current key: new envelopes are signed with it.
    Active,
    /// Replaced by a newer key; kept so what it signed stays verifiable.
    Retired,
}

impl KeyState {
    /// The database spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            KeyState::Active => "active",
            KeyState::Retired => "retired",
        }
    }
}

/// A signing key as shown to an operator: the public half only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKeyInfo {
    /// The tenant scope.
    pub tenant: String,
    /// The project scope.
    pub project: String,
    /// The key id envelopes name.
    pub key_id: String,
    /// The Ed25519 public key: what the receiver adds with `wharf key add`.
    pub public_key: [u8; 32],
    /// Current or retired.
    pub state: KeyState,
    /// When it was generated.
    pub created_at: DateTime<Utc>,
    /// When a newer key replaced it.
    pub retired_at: Option<DateTime<Utc>>,
}

impl SigningKeyInfo {
    /// The public key as standard base64.
    pub fn public_key_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.public_key)
    }

    fn from_row(row: store::SigningKeyRow) -> Result<SigningKeyInfo, Error> {
        let corrupt = |what: &str| Error::Corrupt(format!("signing key {:?}: {what}", row.key_id));
        Ok(SigningKeyInfo {
            public_key: row
                .public_key
                .as_slice()
                .try_into()
                .map_err(|_| corrupt("public key is not 32 bytes"))?,
            state: match row.state.as_str() {
                "active" => KeyState::Active,
                "retired" => KeyState::Retired,
                _ => return Err(corrupt("unknown state")),
            },
            tenant: row.tenant_id,
            project: row.project_id,
            key_id: row.key_id,
            created_at: row.created_at,
            retired_at: row.retired_at,
        })
    }
}

/// A fresh key id: `out-` and 16 random hex digits. Random so two servers or two operators
/// never collide; the prefix tells a receiver's operator that the key is a wharf server's.
fn new_key_id() -> String {
    let mut bytes = [0u8; 8];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("out-{}", hex::encode(bytes))
}

/// Generates a signing key for (tenant, project), seals it under `server_key` and makes it
/// the scope's current key; the previous current key is retired, not deleted. One statement,
/// so it is atomic on its own and may also run inside the caller's transaction.
///
/// Returns the new key's public half: hand its key id and public key to the receiver's
/// operator (`wharf key add`). [`Error::ConcurrentRotation`] when another rotation of the same
/// scope won the race.
pub async fn generate_signing_key<'e>(
    ex: impl PgExecutor<'e>,
    server_key: &ServerKey,
    tenant: &str,
    project: &str,
) -> Result<SigningKeyInfo, Error> {
    check_scope(tenant, project)?;
    let key = SigningKey::generate(&mut rand::rngs::OsRng);
    let key_id = new_key_id();
    let public_key = key.verifying_key().to_bytes();
    let sealed = seal_signing_key(server_key, tenant, project, &key_id, &key);
    let created_at = store::signing_key_rotate(
        ex,
        store::NewSigningKey {
            tenant_id: tenant,
            project_id: project,
            key_id: &key_id,
            public_key: &public_key,
            sealed_private_key: &sealed,
            sealed_by: &server_key.fingerprint(),
        },
    )
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(db)
            if db.is_unique_violation()
                && db.constraint() == Some("ux_outbound_signing_keys_active") =>
        {
            Error::ConcurrentRotation {
                tenant: tenant.to_owned(),
                project: project.to_owned(),
            }
        }
        _ => Error::Database(e),
    })?;
    Ok(SigningKeyInfo {
        tenant: tenant.to_owned(),
        project: project.to_owned(),
        key_id,
        public_key,
        state: KeyState::Active,
        created_at,
        retired_at: None,
    })
}

/// The signing keys of `tenant` (of one project when given), current and retired, oldest first
/// per project.
pub async fn list_signing_keys<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: Option<&str>,
) -> Result<Vec<SigningKeyInfo>, Error> {
    check_scope(tenant, project.unwrap_or("any"))?;
    store::signing_key_list(ex, tenant, project)
        .await?
        .into_iter()
        .map(SigningKeyInfo::from_row)
        .collect()
}

/// One signing key's public half, current or retired: what the receiving side adds with
/// `wharf key add`. [`Error::KeyNotFound`] when the scope has no such key.
pub async fn public_key<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    key_id: &str,
) -> Result<SigningKeyInfo, Error> {
    check_scope(tenant, project)?;
    let row = store::signing_key_get(ex, tenant, project, key_id)
        .await?
        .ok_or_else(|| Error::KeyNotFound {
            tenant: tenant.to_owned(),
            project: project.to_owned(),
            key_id: key_id.to_owned(),
        })?;
    SigningKeyInfo::from_row(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7u8; 32])
    }

    #[test]
    fn seals_open_only_in_their_own_row_under_their_own_server_key() {
        let server = ServerKey::from_bytes([1u8; 32]);
        let k = key();
        let public = k.verifying_key().to_bytes();
        let sealed = seal_signing_key(&server, "acme", "web", "k1", &k);
        assert_eq!(sealed.len(), SEALED_KEY_BYTES);
        let opened = open_signing_key(&server, "acme", "web", "k1", &public, &sealed).unwrap();
        assert_eq!(opened.to_bytes(), k.to_bytes());

        let broken = |r: Result<SigningKey, Error>| matches!(r, Err(Error::SealBroken { .. }));
        let other_server = ServerKey::from_bytes([2u8; 32]);
        assert!(broken(open_signing_key(
            &other_server,
            "acme",
            "web",
            "k1",
            &public,
            &sealed
        )));
        assert!(broken(open_signing_key(
            &server, "other", "web", "k1", &public, &sealed
        )));
        assert!(broken(open_signing_key(
            &server, "acme", "app", "k1", &public, &sealed
        )));
        assert!(broken(open_signing_key(
            &server, "acme", "web", "k2", &public, &sealed
        )));
        // Length prefixes: moving bytes between tenant and project is another scope.
        assert!(broken(open_signing_key(
            &server, "acm", "eweb", "k1", &public, &sealed
        )));
        let other_public = SigningKey::from_bytes(&[8u8; 32])
            .verifying_key()
            .to_bytes();
        assert!(broken(open_signing_key(
            &server,
            "acme",
            "web",
            "k1",
            &other_public,
            &sealed
        )));
        for i in 1..sealed.len() {
            let mut flipped = sealed.clone();
            flipped[i] ^= 1;
            assert!(
                broken(open_signing_key(
                    &server, "acme", "web", "k1", &public, &flipped
                )),
                "byte {i}"
            );
        }
        let mut wrong_version = sealed.clone();
        wrong_version[0] = 2;
        assert!(matches!(
            open_signing_key(&server, "acme", "web", "k1", &public, &wrong_version),
            Err(Error::Corrupt(_))
        ));
        assert!(matches!(
            open_signing_key(&server, "acme", "web", "k1", &public, &sealed[..60]),
            Err(Error::Corrupt(_))
        ));
    }

    #[test]
    fn every_seal_has_its_own_nonce() {
        let server = ServerKey::generate();
        let a = seal_signing_key(&server, "acme", "web", "k1", &key());
        let b = seal_signing_key(&server, "acme", "web", "k1", &key());
        assert_ne!(a[1..1 + NONCE_LEN], b[1..1 + NONCE_LEN]);
        assert_ne!(a, b);
    }

    #[test]
    fn server_key_text_form() {
        let k = ServerKey::generate();
        let text = k.to_base64();
        let back = ServerKey::from_base64(&format!("{text}\n")).unwrap();
        assert_eq!(back.fingerprint(), k.fingerprint());
        assert_ne!(ServerKey::generate().fingerprint(), k.fingerprint());
        let check_bad = |text: &str| {
            assert!(
                matches!(ServerKey::from_base64(text), Err(Error::Invalid { .. })),
                "{text:?}"
            );
        };
        check_bad("");
        check_bad("not base64!");
        check_bad(&base64::engine::general_purpose::STANDARD.encode([0u8; 31]));
        check_bad(&base64::engine::general_purpose::STANDARD.encode([0u8; 33]));
        // Never printed, not even in Debug.
        let shown = format!("{k:?}");
        assert!(!shown.contains(&text), "{shown}");
    }
}
