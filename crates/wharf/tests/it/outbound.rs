//! Outbound envelopes and dead letters (filled by the outbound work).
