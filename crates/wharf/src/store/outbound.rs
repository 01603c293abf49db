//! Outbound statements (filled by the outbound work).
