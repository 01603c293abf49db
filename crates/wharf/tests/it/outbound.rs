//! Outbound integration tests: signed envelopes through the outbox, the server's signing keys,
//! the delivery limit and dead letters (SPEC §3.8), against real PostgreSQL.
//!
//! `support` builds a scope with a current signing key and a registry whose `envelope` kind is
//! a recording stub; every other module is one concern.

mod claim_limit;
mod dead_letters;
mod delivery;
mod emit;
mod keys;
mod redrive;
mod support;
