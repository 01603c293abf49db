//! Inbox integration tests: the ingest pipeline of SPEC §3.4 and §3.5 against real PostgreSQL.
//!
//! `support` builds a tenant with a credential and a key; every other module is one concern.

mod admin;
mod batch;
mod concurrency;
mod group;
mod isolation;
mod key_lifecycle;
mod limits;
mod outcomes;
mod plans;
mod refusals;
mod retention;
mod support;
