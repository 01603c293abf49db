//! Outbound signed envelopes and dead letters (filled by the outbound work).
