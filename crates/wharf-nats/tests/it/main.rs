//! wharf-nats's one integration-test binary: a real NATS server with JetStream (its URL in
//! `WHARF_TEST_NATS_URL`; `.ci/run` starts one when none is running) and real PostgreSQL (the
//! testkit's ephemeral cluster, one database per test). Without the URL every test says on
//! stderr that it did not run, and passes vacuously; `.ci/run` always gives one.
//!
//! Every test has its own stream, consumer and subjects, so they run in parallel.

mod ingest;
mod outbound;
mod support;
