//! One module per command group. Each parses its own arguments (clap `Args`/`Subcommand`) and
//! exposes `async fn run(config, args) -> anyhow::Result<()>`.

pub mod actions;
pub mod backup;
pub mod bench;
pub mod outbound;
pub mod progress;
pub mod serve;
pub mod verify;
