//! The outbox (placeholder, filled by the outbox work).
