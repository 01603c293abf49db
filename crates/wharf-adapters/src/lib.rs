//! wharf's built-in adapters, one module per kind family, each behind a feature:
//!
//! - `email` (feature `email`): the `email` kind over SMTP, or `.eml` files with no relay.
//! - `http` (feature `http`): the network sender, and the `webhook` and `envelope` kinds on it.
//!
//! Must not know: how actions are claimed, fenced or completed. An adapter receives an
//! `Attempt` from the executor, fences before the provider call, and returns an `Outcome`.
//!
//! # Quick start: a signed webhook, enqueued with the change that causes it
//!
//! ```no_run
//! use std::sync::Arc;
//! use wharf::outbox::{ActionRequest, Executor, ExecutorConfig, Registry};
//! use wharf_adapters::http::{
//!     HttpSenderConfig, InMemoryWebhookSigner, NetworkSender, WEBHOOK_KIND, WebhookAdapter,
//!     WebhookPayload,
//! };
//!
//! # async fn example(pool: wharf::sqlx::PgPool, key: ed25519_dalek::SigningKey)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! let sender = NetworkSender::new(&HttpSenderConfig::default())?; // guarded, no redirects
//! let signer = Arc::new(InMemoryWebhookSigner::new(key)); // Standard Webhooks signatures
//! let mut registry = Registry::new();
//! registry.register(Arc::new(WebhookAdapter::new(sender, signer)))?;
//! let registry = Arc::new(registry);
//!
//! let mut tx = pool.begin().await?;
//! // ... the application's own change, in `tx` ...
//! let payload = WebhookPayload::new("https://hooks.example.com/orders", serde_json::json!({"order": 42}));
//! let request = ActionRequest::new(WEBHOOK_KIND, "order-42", "order-42:paid", payload.to_value())
//!     .tenant("acme");
//! wharf::outbox::enqueue(&mut tx, &registry, request).await?;
//! tx.commit().await?; // the webhook exists exactly when the change does
//!
//! Executor::new(pool, registry, ExecutorConfig::default())?.drain().await?;
//! # Ok(()) }
//! ```
//!
//! The `email` module's docs open with the same for an email.

#[cfg(any(feature = "email", feature = "http"))]
mod deadline;
#[cfg(feature = "email")]
pub mod email;
#[cfg(feature = "http")]
pub mod http;
