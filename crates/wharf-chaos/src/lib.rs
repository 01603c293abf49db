//! wharf under faults: a harness that runs real `wharf work` replicas and `wharf serve` (the
//! built binary) on one ephemeral PostgreSQL cluster, with a recording webhook receiver and
//! SMTP relay on loopback, injects faults at random moments — kill -9 and restart, SIGSTOP
//! past the lease, `pg_terminate_backend`, PostgreSQL immediate restarts, replicas that die at
//! named points of an attempt, network cuts between the replicas and the providers, providers
//! answering 4xx/5xx or stalling past the timeout — while an outbox feeder enqueues and inbox producers
//! send shuffled streams with retries; then checks the sinks' logs and the database
//! ([`check`]).
//!
//! `cargo test -p wharf-chaos` runs [`run::Settings::small`] (30–40 s);
//! `cargo run --release -p wharf-chaos -- --big` the run RELIABILITY.md reports.
//!
//! Must not know: wharf's internals beyond its public library (enqueue, inbox
//! administration), its binary's command line and its tables' columns.

pub mod check;
mod faults;
pub mod procs;
pub mod report;
pub mod run;
pub mod sink;
pub mod wire;
