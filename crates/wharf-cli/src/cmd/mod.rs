//! One module per command group. Each parses its own arguments (clap `Args`/`Subcommand`) and
//! exposes `async fn run(config, args) -> anyhow::Result<()>`.

pub mod actions;
pub mod backup;
pub mod bench;
pub mod credential;
pub mod db;
pub mod key;
pub mod kinds;
pub mod operator;
pub mod outbound;
pub mod progress;
pub mod retention;
pub mod send;
pub mod serve;
pub mod streams;
pub mod tenant;
pub mod verify;
pub mod webhook_key;
