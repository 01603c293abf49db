//! The network sender and the HTTP kinds on it.
//!
//! - [`NetworkSender`] (`sender`): one guarded HTTP client — rustls on ring, no redirects, no
//!   proxy, connect and total timeouts, a private-address guard with an allow-list — that
//!   turns every exchange into a [`Verdict`] (`classify`, SPEC §2.5).
//! - [`HttpSenderConfig`] (`config`): the `[http]` table of `wharf.toml`.
//! - The address guard (`guard`) and webhook signatures (`signer`, Standard Webhooks `v1a`).
//! - The `webhook` kind ([`WebhookAdapter`], `webhook`) and the `envelope` kind
//!   ([`EnvelopeAdapter`], `envelope`, with the `[envelope]` credentials table), which both
//!   fence and send through the shared last steps in `deliver`.
//!
//! # Wiring
//!
//! ```no_run
//! # use std::sync::Arc;
//! use wharf_adapters::http::{
//!     EnvelopeAdapter, EnvelopeConfig, HttpSenderConfig, InMemoryWebhookSigner, NetworkSender,
//!     WebhookAdapter,
//! };
//! # fn wire(key: ed25519_dalek::SigningKey, budget: Arc<wharf::outbound::DeliveryBudget>)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! let sender = NetworkSender::new(&HttpSenderConfig::default())?; // the [http] table
//! let signer = Arc::new(InMemoryWebhookSigner::new(key)); // or the deployment's key source
//! let mut registry = wharf::outbox::Registry::new();
//! registry.register(Arc::new(WebhookAdapter::new(sender.clone(), signer)))?;
//! let envelopes = EnvelopeAdapter::new(sender, &EnvelopeConfig::default())?; // [envelope]
//! registry.register(Arc::new(envelopes.with_budget(budget)))?;
//! # Ok(()) }
//! ```
//!
//! Must not know: how actions are claimed, fenced or completed, beyond calling
//! `fence().begin_write()` right before a request and returning an `Outcome`.

mod classify;
mod config;
mod deliver;
mod envelope;
mod error;
mod guard;
mod sender;
mod signer;
mod webhook;

pub use classify::{
    READBACK_REF_BYTES_MAX, REQUEST_ID_HEADERS, ResponseHead, TransportFailure, Verdict,
    classify_failure, classify_response, code, parse_retry_after, readback_ref,
};
pub use config::{
    CALL_SLACK_MS, CONNECT_TIMEOUT_MS_MAX, HttpSenderConfig, LIST_ENTRIES_MAX,
    RESPONSE_BYTES_MAX_LIMIT, TOTAL_TIMEOUT_MS_MAX,
};
pub use deliver::CALL_RESERVE_MS;
pub use envelope::{
    BEARER_TOKEN_BYTES_MAX, DESTINATIONS_MAX, ENVELOPE_ATTEMPTS_DEFAULT, EnvelopeAdapter,
    EnvelopeConfig, EnvelopeDestinationConfig, envelope_code, receiver_outcome,
};
pub use error::Error;
pub use guard::{AddressClass, AddressGuard, Cidr, CidrParseError, Forbidden, classify_address};
pub use sender::{Delivery, Destination, NetworkSender, PIN_MS, POOL_IDLE_MS};
pub use signer::{
    InMemoryWebhookSigner, SIGNATURE_VERSION, SIGNATURES_MAX, SignScope, SignerError,
    WebhookSigner, WebhookVerifyError, parse_public_key_whpk, public_key_whpk, signature_header,
    signed_content, verify_webhook,
};
pub use webhook::{
    EndpointStatus, URL_BYTES_MAX, WEBHOOK_ATTEMPTS_DEFAULT, WEBHOOK_KIND, WebhookAdapter,
    WebhookEndpoints, WebhookPayload, webhook_backoff, webhook_code,
};
