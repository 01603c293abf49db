//! The network sender and the HTTP kinds on it.
//!
//! - [`NetworkSender`] (`sender`): one guarded HTTP client — rustls on ring, no redirects, no
//!   proxy, connect and total timeouts, a private-address guard with an allow-list — that
//!   turns every exchange into a [`Verdict`] (`classify`, SPEC §2.5).
//! - [`HttpSenderConfig`] (`config`): the `[http]` table of `wharf.toml`.
//! - The address guard (`guard`) and webhook signatures (`signer`, Standard Webhooks `v1a`).
//!
//! Must not know: how actions are claimed, fenced or completed, beyond calling
//! `fence().begin_write()` right before a request and returning an `Outcome`.

mod classify;
mod config;
mod error;
mod guard;
mod sender;
mod signer;

pub use classify::{
    READBACK_REF_BYTES_MAX, REQUEST_ID_HEADERS, ResponseHead, TransportFailure, Verdict,
    classify_failure, classify_response, code, parse_retry_after, readback_ref,
};
pub use config::{
    HttpSenderConfig, LIST_ENTRIES_MAX, RESPONSE_BYTES_MAX_LIMIT, TOTAL_TIMEOUT_MS_MAX,
};
pub use error::Error;
pub use guard::{AddressClass, AddressGuard, Cidr, CidrParseError, Forbidden, classify_address};
pub use sender::{Delivery, Destination, NetworkSender, PIN_MS, POOL_IDLE_MS};
pub use signer::{
    InMemoryWebhookSigner, SIGNATURE_VERSION, SIGNATURES_MAX, SignScope, SignerError,
    WebhookSigner, WebhookVerifyError, parse_public_key_whpk, public_key_whpk, signature_header,
    signed_content, verify_webhook,
};
