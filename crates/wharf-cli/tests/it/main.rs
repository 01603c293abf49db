//! The `wharf` binary's one integration-test binary: the real executable, real PostgreSQL,
//! real HTTP on loopback.

mod actions;
mod backup;
mod bench;
mod embedded;
mod exchange;
mod firsthour;
mod jetstream;
mod operator;
mod quickstart;
mod serve;
mod startup;
mod support;
mod webhook_key;
