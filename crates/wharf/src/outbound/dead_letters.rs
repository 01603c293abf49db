//! Dead letters: the FAILED actions of one (tenant, project), keyset-paginated (SPEC §3.8).
//!
//! Owns: the page bound, the opaque [`Cursor`] and the [`DeadLetter`] view. Must not know: why
//! an action failed beyond its stop reason and stable error code, or HTTP (the `GET
//! …/dead-letters` route and `wharf dead-letters` call [`dead_letters`]).
//!
//! # Paging
//!
//! Pages run in `(ended_at, id)` order, oldest failure first, and a cursor is the last row's
//! `(ended_at, id)`. An ended action never changes (the outbox's guard trigger), so every row
//! that existed when paging began is returned exactly once, however many failures arrive
//! meanwhile. A failure that arrives during paging is returned on a later page when its
//! `ended_at` is after the cursor, which is the usual case; one recorded within the same instant
//! as a page's last row, by a transaction that committed later, can sort before the cursor and
//! is seen by the next pass from the start.
//!
//! Every view is of stable fields only: never a payload (an ended action has none) nor any
//! provider text.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};
use sqlx::PgExecutor;
use wharf_core::action::StopReason;

use super::error::Error;
use crate::outbox::SCOPE_BYTES_MAX;
use crate::store::outbound as store;

/// Most dead letters one page holds, and the default. A page of 100 is a few tens of KiB of
/// JSON: small enough to answer at once, big enough that a backlog of thousands pages quickly.
pub const DEAD_LETTERS_PAGE_ITEMS_MAX: u32 = 100;

/// Where the next page starts: an opaque string (22 characters of URL-safe base64). Hand it
/// back unchanged as `after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    ended_at: DateTime<Utc>,
    id: i64,
}

impl Cursor {
    /// Bytes behind the text: ended_at in microseconds since the epoch (PostgreSQL's own
    /// resolution, so the round trip is exact) and the action id, both big-endian.
    const BYTES: usize = 16;

    fn after(row: &DeadLetter) -> Cursor {
        Cursor {
            ended_at: row.ended_at,
            id: row.id,
        }
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut bytes = [0u8; Cursor::BYTES];
        bytes[..8].copy_from_slice(&self.ended_at.timestamp_micros().to_be_bytes());
        bytes[8..].copy_from_slice(&self.id.to_be_bytes());
        f.write_str(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
    }
}

impl FromStr for Cursor {
    type Err = Error;

    /// Parses a cursor this module handed out; anything else is [`Error::InvalidCursor`].
    fn from_str(text: &str) -> Result<Cursor, Error> {
        // The decoder refuses padding and non-zero trailing bits, so one cursor has one text.
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text.as_bytes())
            .map_err(|_| Error::InvalidCursor)?;
        let bytes: [u8; Cursor::BYTES] = bytes.try_into().map_err(|_| Error::InvalidCursor)?;
        let micros = i64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
        let id = i64::from_be_bytes(bytes[8..].try_into().expect("8 bytes"));
        let ended_at = DateTime::from_timestamp_micros(micros).ok_or(Error::InvalidCursor)?;
        if id < 1 {
            return Err(Error::InvalidCursor);
        }
        Ok(Cursor { ended_at, id })
    }
}

impl Serialize for Cursor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One FAILED action, as an operator may see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[non_exhaustive]
pub struct DeadLetter {
    /// The action id.
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// Its lane.
    pub lane_key: String,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// `ATTEMPTS_EXHAUSTED` or `PROVIDER_REFUSED`.
    #[serde(serialize_with = "stop_reason_text")]
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub stop_reason: StopReason,
    /// The last stable error code, when there is one.
    pub error_code: Option<String>,
    /// Attempts counted.
    pub attempt: u32,
    /// When it failed.
    pub ended_at: DateTime<Utc>,
}

fn stop_reason_text<S: Serializer>(reason: &StopReason, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(reason.as_str())
}

/// One page of dead letters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Page {
    /// Oldest failure first.
    pub items: Vec<DeadLetter>,
    /// Where the next page starts; `None` when this page reached the end (for now).
    pub next: Option<Cursor>,
}

fn check_scope_part(field: &'static str, value: &str) -> Result<(), Error> {
    if value.is_empty() || value.len() > SCOPE_BYTES_MAX {
        return Err(Error::invalid(
            field,
            format!("an explicit 1..={SCOPE_BYTES_MAX}-byte value is required"),
        ));
    }
    // PostgreSQL text cannot hold U+0000: such a scope names nothing, and the query would fail
    // with a database error a client would be told to retry.
    if value.contains('\0') {
        return Err(Error::invalid(field, "must not contain U+0000 (NUL)"));
    }
    Ok(())
}

/// One page of the FAILED actions of (tenant, project), after `after` (from the start when
/// `None`), at most `limit` of them (1..=[`DEAD_LETTERS_PAGE_ITEMS_MAX`], the maximum when
/// `None`).
///
/// Both scope parts are required: there is no query across tenants or across projects, so a
/// tenant's caller can never see another's failures by leaving one out.
pub async fn dead_letters<'e>(
    ex: impl PgExecutor<'e>,
    tenant: &str,
    project: &str,
    after: Option<&Cursor>,
    limit: Option<u32>,
) -> Result<Page, Error> {
    check_scope_part("tenant", tenant)?;
    check_scope_part("project", project)?;
    let limit = limit.unwrap_or(DEAD_LETTERS_PAGE_ITEMS_MAX);
    if !(1..=DEAD_LETTERS_PAGE_ITEMS_MAX).contains(&limit) {
        return Err(Error::invalid(
            "limit",
            format!("must be 1..={DEAD_LETTERS_PAGE_ITEMS_MAX}, is {limit}"),
        ));
    }
    // One row more than the page tells whether a next page exists without a second query.
    let rows = store::dead_letters(
        ex,
        tenant,
        project,
        after.map(|c| (c.ended_at, c.id)),
        i64::from(limit) + 1,
    )
    .await?;
    let mut items = rows
        .into_iter()
        .map(|row| {
            Ok(DeadLetter {
                stop_reason: row
                    .stop_reason
                    .parse()
                    .map_err(|e| Error::Corrupt(format!("action {}: {e}", row.id)))?,
                attempt: u32::try_from(row.attempt).unwrap_or(0),
                id: row.id,
                kind: row.kind,
                lane_key: row.lane_key,
                idempotency_key: row.idempotency_key,
                error_code: row.error_code,
                ended_at: row.ended_at,
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let next = if items.len() > limit as usize {
        items.truncate(limit as usize);
        items.last().map(Cursor::after)
    } else {
        None
    };
    Ok(Page { items, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        let at = DateTime::from_timestamp_micros(1_700_000_000_123_456).unwrap();
        let c = Cursor {
            ended_at: at,
            id: 42,
        };
        let text = c.to_string();
        assert_eq!(text.len(), 22);
        assert_eq!(text.parse::<Cursor>().unwrap(), c);
        assert_eq!(serde_json::to_value(c).unwrap(), serde_json::json!(text));

        let bad = |t: &str| {
            assert!(
                matches!(t.parse::<Cursor>(), Err(Error::InvalidCursor)),
                "{t:?}"
            )
        };
        bad("");
        bad("not a cursor");
        bad(&format!("{text}="));
        bad(&text[..21]);
        bad(&format!("{text}AA"));
        let zero_id = Cursor {
            ended_at: at,
            id: 0,
        }
        .to_string();
        bad(&zero_id);
        // Standard base64's alphabet is not the URL-safe one.
        let mut bytes = [0xffu8; 16];
        bytes[8..].copy_from_slice(&42i64.to_be_bytes());
        bad(&base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes));
    }
}
