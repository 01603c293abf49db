//! Outbound: signed `controlplane/v1` envelopes from this server to others, the server's
//! signing keys, the delivery rate limit and dead letters (SPEC §3.8).
//!
//! ```text
//! application tx ──emit_envelope──▶ wharf.outbound_envelopes (immutable, by idempotency key)
//!                        │  signs with SigningKeySource::current(scope)
//!                        └─enqueue──▶ wharf.action kind "envelope", lane per receiver stream
//!                                          │ executor + envelope adapter (wharf-adapters):
//!                                          │ DeliveryBudget, then the network sender
//!                                          ▼
//!                        DONE, or FAILED ──▶ dead_letters(tenant, project, cursor)
//! ```
//!
//! - [`emit_envelope`] validates the payload against the built-in catalog, builds and signs an
//!   envelope with the scope's current key and enqueues its delivery, all in the caller's
//!   transaction. Same idempotency key and same request ⇒ the original envelope, byte for byte;
//!   another request ⇒ [`Error::IdempotencyConflict`]. Each receiver stream (tenant, project,
//!   destination) gets a gap-free `producer_sequence` and one lane, so the receiver's cursor
//!   moves as envelopes arrive.
//! - [`ServerKey`] seals signing keys at rest; [`generate_signing_key`] rotates a scope's key
//!   (the old one is retired and kept), [`list_signing_keys`] and [`public_key`] show public
//!   halves for the receiver's `wharf key add`. A deployment may inject its own
//!   [`SigningKeySource`] instead of [`SealedKeySource`].
//! - [`DeliveryBudget`] is the per-tenant `delivery` rate limit the `envelope` adapter consults
//!   (see its module for what it needs from the claim).
//! - [`dead_letters`] pages the FAILED actions of one explicit (tenant, project); [`reader_of`]
//!   says whether a credential may read a tenant's dead letters and signing keys (its own only).
//!
//! # Quick start
//!
//! ```no_run
//! # async fn example(pool: sqlx::PgPool, registry: wharf::outbox::Registry) -> Result<(), wharf::outbound::Error> {
//! use wharf::outbound::{self, Destination, EmitRequest, SealedKeySource, Scope, ServerKey};
//! let server_key = ServerKey::generate(); // in production: from <data-dir>/server.key
//! let key = outbound::generate_signing_key(&pool, &server_key, "acme", "web").await?;
//! // The receiver files it under the same scope and key id (`wharf key add`, `inbox::add_key`).
//! println!("acme/web {} {}", key.key_id, key.public_key_base64());
//!
//! let keys = SealedKeySource::new(server_key);
//! let mut tx = pool.begin().await?;
//! let request = EmitRequest::new(
//!     Scope::new("acme", "web"),
//!     "sync_cursor",
//!     serde_json::json!({"producer_id": "srv-1", "acknowledged_sequence": 7,
//!                        "acknowledged_event_id": null, "version": 1}),
//!     "cursor:srv-1:7",
//!     Destination::new("https://b.example/v1/tenants/acme/projects/web/envelopes"),
//! );
//! outbound::emit_envelope(&mut tx, &registry, &keys, &request).await?;
//! tx.commit().await?;
//!
//! let page = outbound::dead_letters(&pool, "acme", "web", None, None).await?;
//! for letter in &page.items {
//!     println!("{} {} {:?}", letter.id, letter.stop_reason, letter.error_code);
//! }
//! # Ok(()) }
//! ```
//!
//! Must not know: HTTP, the network sender, or the inbox's verification keys. The `envelope`
//! adapter lives in `wharf-adapters` and reads [`EnvelopeDelivery`] from its action.

mod dead_letters;
pub mod delivery;
mod emit;
mod error;
mod keys;
mod readers;
mod redrive;
mod scope;

pub use dead_letters::{Cursor, DEAD_LETTERS_PAGE_ITEMS_MAX, DeadLetter, Page, dead_letters};
pub use delivery::{DELIVERY_PURPOSE, DeliveryBudget, TenantAllowance};
pub use emit::{
    ENVELOPE_KIND, EmitRequest, Emitted, EnvelopeDelivery, PRODUCER_VERSION, emit_envelope,
    lane_key, request_digest,
};
pub use error::Error;
pub use keys::{
    CurrentKey, KeyState, SEALED_KEY_BYTES, SERVER_KEY_BYTES, SealedKeySource, ServerKey,
    SigningKeyInfo, SigningKeySource, generate_signing_key, list_signing_keys, open_signing_key,
    public_key, seal_signing_key,
};
pub use readers::{Reader, reader_of};
pub use redrive::{REDRIVE_BATCH_MAX, RedriveFilter, Redriven, redrive};
pub use scope::{DESTINATION_URL_BYTES_MAX, Destination, Scope};
