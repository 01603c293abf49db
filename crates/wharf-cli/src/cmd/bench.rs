//! `wharf bench`: the benchmarks live in `wharf-bench`; this module only opens their database.
//!
//! Owns: how the bench database is reached, the way every command reaches its own (the
//! embedded cluster's `wharf_bench` database, or `DATABASE_URL` as given), and its closing
//! (stopping a cluster this process started). Must not know: what a benchmark measures or
//! prints, nor which database contents it refuses — both are `wharf-bench`'s.

use wharf_bench::{BENCH_DATABASE, BenchArgs};

use crate::config::Config;
use crate::db::{Database, Open, Wait};

/// `wharf bench`.
pub async fn run(config: &Config, args: BenchArgs) -> anyhow::Result<()> {
    let open = async |connections_max: u32| {
        let db = Database::open_named(
            config,
            Open {
                migrate: true,
                connections_max,
                wait: Wait::ONCE,
            },
            BENCH_DATABASE,
            &|_| {},
        )
        .await?;
        let (pool, url) = (db.pool.clone(), db.url.clone());
        Ok(wharf_bench::Database::new(pool, url, db.close()))
    };
    wharf_bench::run(open, args).await
}
