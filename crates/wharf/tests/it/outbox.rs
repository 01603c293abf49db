//! Outbox integration tests: real PostgreSQL, one fresh database per test.
//!
//! Time moves through the `now` parameters and direct UPDATEs of lease times, never sleeps, so
//! no assertion depends on timing. Support (fake adapters, helpers) is in `outbox/support.rs`.

mod claim_fence;
mod claim_window;
mod conformance;
mod enqueue;
mod executor;
mod fence;
mod guard;
mod housekeeping;
mod operator;
mod pause;
mod plans;
mod reclaim;
mod run_loop;
mod support;
mod tenant_caps;
mod vacuum;
