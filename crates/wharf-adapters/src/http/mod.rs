//! The network sender (placeholder, filled by the outbound work).
