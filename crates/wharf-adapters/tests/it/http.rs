//! HTTP adapter tests (filled by the outbound work).
