//! Outbound statements: one `.sql` file under `sql/outbound/` each, one small function each.
//!
//! Owns: the SQL text of signing keys, receiver-stream sequences, emitted envelopes and the
//! dead-letter page, and the translation between Rust values and columns.
//!
//! Must not know: sealing, signing, request digests, cursors' encoding or when a key may be
//! used. Every function takes the caller's executor first and values [`crate::outbound`]
//! already decided; none starts a transaction of its own.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor, Row};

/// A current signing key as stored: the public half and the sealed private half.
#[derive(Debug, Clone)]
pub struct SealedKeyRow {
    /// The key id envelopes name.
    pub key_id: String,
    /// The Ed25519 public key (32 bytes).
    pub public_key: Vec<u8>,
    /// The sealed private seed (version, nonce, ciphertext, tag).
    pub sealed_private_key: Vec<u8>,
    /// Fingerprint of the server key that sealed it (8 bytes).
    pub sealed_by: Vec<u8>,
}

/// A signing key as listed: never the sealed private half.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKeyRow {
    /// The tenant scope.
    pub tenant_id: String,
    /// The project scope.
    pub project_id: String,
    /// The key id.
    pub key_id: String,
    /// The Ed25519 public key (32 bytes).
    pub public_key: Vec<u8>,
    /// `active` or `retired`.
    pub state: String,
    /// When it was generated.
    pub created_at: DateTime<Utc>,
    /// When a newer key replaced it.
    pub retired_at: Option<DateTime<Utc>>,
}

/// A new signing key, sealed.
#[derive(Debug, Clone, Copy)]
pub struct NewSigningKey<'a> {
    /// The tenant scope.
    pub tenant_id: &'a str,
    /// The project scope.
    pub project_id: &'a str,
    /// The key id.
    pub key_id: &'a str,
    /// The Ed25519 public key.
    pub public_key: &'a [u8],
    /// The sealed private seed.
    pub sealed_private_key: &'a [u8],
    /// Fingerprint of the sealing server key.
    pub sealed_by: &'a [u8],
}

/// An emitted envelope found by idempotency key.
#[derive(Debug, Clone)]
pub struct EnvelopeRow {
    /// The idempotency key.
    pub idempotency_key: String,
    /// SHA-256 of the request it was emitted for.
    pub request_digest: Vec<u8>,
    /// The canonical JSON as signed and sent.
    pub envelope: String,
    /// The delivery action (NULL only inside the emitting transaction).
    pub action_id: Option<i64>,
}

/// A newly signed envelope, to be stored under its key.
#[derive(Debug, Clone, Copy)]
pub struct NewEnvelope<'a> {
    /// The idempotency key.
    pub idempotency_key: &'a str,
    /// SHA-256 of the request.
    pub request_digest: &'a [u8],
    /// The tenant.
    pub tenant_id: &'a str,
    /// The project.
    pub project_id: &'a str,
    /// The receiver's URL.
    pub destination_url: &'a str,
    /// The event type.
    pub event_type: &'a str,
    /// The event id (ULID).
    pub event_id: &'a str,
    /// The sequence in the receiver stream.
    pub producer_sequence: i64,
    /// The signing key's id.
    pub key_id: &'a str,
    /// The canonical JSON as signed.
    pub envelope: &'a str,
}

/// A dead letter as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterRow {
    /// The action id.
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// Its lane.
    pub lane_key: String,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// `ATTEMPTS_EXHAUSTED` or `PROVIDER_REFUSED`.
    pub stop_reason: String,
    /// The last stable error code, when the adapter gave one.
    pub error_code: Option<String>,
    /// Attempts counted.
    pub attempt: i32,
    /// When it failed.
    pub ended_at: DateTime<Utc>,
}

fn signing_key_row(row: &sqlx::postgres::PgRow) -> Result<SigningKeyRow, sqlx::Error> {
    Ok(SigningKeyRow {
        tenant_id: row.try_get("tenant_id")?,
        project_id: row.try_get("project_id")?,
        key_id: row.try_get("key_id")?,
        public_key: row.try_get("public_key")?,
        state: row.try_get("state")?,
        created_at: row.try_get("created_at")?,
        retired_at: row.try_get("retired_at")?,
    })
}

/// `signing_key_rotate.sql`: retires the scope's current key and inserts `key` as current.
/// A concurrent rotation of the same scope fails with a unique violation on
/// `ux_outbound_signing_keys_active`.
pub async fn signing_key_rotate<'e>(
    ex: impl PgExecutor<'e>,
    key: NewSigningKey<'_>,
) -> Result<DateTime<Utc>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../../sql/outbound/signing_key_rotate.sql"))
        .bind(key.tenant_id)
        .bind(key.project_id)
        .bind(key.key_id)
        .bind(key.public_key)
        .bind(key.sealed_private_key)
        .bind(key.sealed_by)
        .fetch_one(ex)
        .await
}

/// `signing_key_current.sql`.
pub async fn signing_key_current<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
) -> Result<Option<SealedKeyRow>, sqlx::Error> {
    let row = sqlx::query(include_str!("../../sql/outbound/signing_key_current.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .fetch_optional(ex)
        .await?;
    row.map(|row| {
        Ok(SealedKeyRow {
            key_id: row.try_get("key_id")?,
            public_key: row.try_get("public_key")?,
            sealed_private_key: row.try_get("sealed_private_key")?,
            sealed_by: row.try_get("sealed_by")?,
        })
    })
    .transpose()
}

/// `signing_key_list.sql`.
pub async fn signing_key_list<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: Option<&str>,
) -> Result<Vec<SigningKeyRow>, sqlx::Error> {
    sqlx::query(include_str!("../../sql/outbound/signing_key_list.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .fetch_all(ex)
        .await?
        .iter()
        .map(signing_key_row)
        .collect()
}

/// `signing_key_get.sql`.
pub async fn signing_key_get<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    key_id: &str,
) -> Result<Option<SigningKeyRow>, sqlx::Error> {
    sqlx::query(include_str!("../../sql/outbound/signing_key_get.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .bind(key_id)
        .fetch_optional(ex)
        .await?
        .as_ref()
        .map(signing_key_row)
        .transpose()
}

/// `sequence_next.sql`: the next sequence of the stream and the database clock. Locks the
/// stream's row until the transaction ends.
pub async fn sequence_next(
    conn: &mut PgConnection,
    tenant_id: &str,
    project_id: &str,
    destination_url: &str,
) -> Result<(i64, DateTime<Utc>), sqlx::Error> {
    let row = sqlx::query(include_str!("../../sql/outbound/sequence_next.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .bind(destination_url)
        .fetch_one(conn)
        .await?;
    Ok((row.try_get("last_sequence")?, row.try_get("now")?))
}

/// `envelope_by_key.sql`.
pub async fn envelope_by_key<'e>(
    ex: impl PgExecutor<'e>,
    idempotency_key: &str,
) -> Result<Option<EnvelopeRow>, sqlx::Error> {
    let row = sqlx::query(include_str!("../../sql/outbound/envelope_by_key.sql"))
        .bind(idempotency_key)
        .fetch_optional(ex)
        .await?;
    row.map(|row| {
        Ok(EnvelopeRow {
            idempotency_key: row.try_get("idempotency_key")?,
            request_digest: row.try_get("request_digest")?,
            envelope: row.try_get("envelope")?,
            action_id: row.try_get("action_id")?,
        })
    })
    .transpose()
}

/// `envelope_insert.sql`: true when the key was claimed, false when another envelope holds it.
pub async fn envelope_insert(
    conn: &mut PgConnection,
    new: NewEnvelope<'_>,
) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query(include_str!("../../sql/outbound/envelope_insert.sql"))
            .bind(new.idempotency_key)
            .bind(new.request_digest)
            .bind(new.tenant_id)
            .bind(new.project_id)
            .bind(new.destination_url)
            .bind(new.event_type)
            .bind(new.event_id)
            .bind(new.producer_sequence)
            .bind(new.key_id)
            .bind(new.envelope)
            .fetch_optional(conn)
            .await?
            .is_some(),
    )
}

/// `envelope_set_action.sql`: true when the row was updated.
pub async fn envelope_set_action(
    conn: &mut PgConnection,
    idempotency_key: &str,
    action_id: i64,
) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query(include_str!("../../sql/outbound/envelope_set_action.sql"))
            .bind(idempotency_key)
            .bind(action_id)
            .execute(conn)
            .await?
            .rows_affected()
            == 1,
    )
}

/// `dead_letters.sql`: at most `rows` dead letters of the scope strictly after `after`
/// (`(ended_at, id)`; `None` from the start).
pub async fn dead_letters<'e>(
    ex: impl PgExecutor<'e>,
    tenant_id: &str,
    project_id: &str,
    after: Option<(DateTime<Utc>, i64)>,
    rows: i64,
) -> Result<Vec<DeadLetterRow>, sqlx::Error> {
    sqlx::query(include_str!("../../sql/outbound/dead_letters.sql"))
        .bind(tenant_id)
        .bind(project_id)
        .bind(after.map(|(ended_at, _)| ended_at))
        .bind(after.map(|(_, id)| id))
        .bind(rows)
        .fetch_all(ex)
        .await?
        .iter()
        .map(|row| {
            Ok(DeadLetterRow {
                id: row.try_get("id")?,
                kind: row.try_get("kind")?,
                lane_key: row.try_get("lane_key")?,
                idempotency_key: row.try_get("idempotency_key")?,
                stop_reason: row.try_get("stop_reason")?,
                error_code: row.try_get("error_code")?,
                attempt: row.try_get("attempt")?,
                ended_at: row.try_get("ended_at")?,
            })
        })
        .collect()
}
