//! Outbox statements (placeholder, filled by the outbox work).
