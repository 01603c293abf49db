//! Outbox integration tests (filled by the outbox work).
