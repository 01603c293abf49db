//! How a command reaches its database: the URL it was given, or wharf's own cluster under
//! `<data-dir>/pg`, created on first use and kept between runs.

use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};

use crate::config::Config;

/// The database the embedded cluster keeps wharf's schema in.
pub const EMBEDDED_DATABASE: &str = "wharf";

/// A command's database, and the embedded cluster behind it when there is one.
pub struct Database {
    /// The pool every library call takes.
    pub pool: PgPool,
    /// The URL as libpq tools (`pg_dump`, `pg_restore`) take it.
    pub url: String,
    cluster: Option<wharf_pg::Cluster>,
}

/// What a command needs of its database.
#[derive(Debug, Clone, Copy)]
pub struct Open {
    /// Run the migrations first (serve, work, migrate).
    pub migrate: bool,
    /// Connections the pool may hold.
    pub connections_max: u32,
}

impl Open {
    /// What most admin commands need: an up-to-date schema is not their job, two connections.
    pub const ADMIN: Open = Open {
        migrate: false,
        connections_max: 2,
    };
}

impl Database {
    /// Connects (starting the embedded cluster if no URL is configured).
    pub async fn open(config: &Config, open: Open) -> anyhow::Result<Database> {
        Database::open_named(config, open, EMBEDDED_DATABASE).await
    }

    /// As [`Database::open`], but on the embedded cluster uses (and creates) the database
    /// `embedded_database` instead of `wharf` — benchmarks keep their rows out of the one
    /// `wharf serve` uses. A configured URL is used as it is.
    pub async fn open_named(
        config: &Config,
        open: Open,
        embedded_database: &'static str,
    ) -> anyhow::Result<Database> {
        let (options, url, cluster) = match &config.database_url {
            Some(url) => {
                let options: PgConnectOptions = url
                    .parse()
                    .context("the database URL is not a valid PostgreSQL URL")?;
                (options, url.clone(), None)
            }
            None => {
                let dir = config.data_dir.join("pg");
                let spinner = crate::cmd::progress::spinner("starting the embedded PostgreSQL");
                let cluster = tokio::task::spawn_blocking(move || {
                    wharf_pg::Cluster::start(&wharf_pg::Options::durable(dir))
                })
                .await
                .context("the PostgreSQL launcher panicked")??;
                spinner.finish_and_clear();
                tracing::info!(
                    data_dir = %cluster.data_dir().display(),
                    port = cluster.port(),
                    reused = !cluster.started_here(),
                    "embedded PostgreSQL ready"
                );
                let admin: PgConnectOptions = cluster.url("postgres").parse()?;
                ensure_database(admin.clone(), embedded_database).await?;
                let url = cluster.url(embedded_database);
                (admin.database(embedded_database), url, Some(cluster))
            }
        };
        let pool = PgPoolOptions::new()
            .max_connections(open.connections_max)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.log_statements(tracing::log::LevelFilter::Off))
            .await
            .context("cannot connect to PostgreSQL")?;
        if open.migrate {
            wharf::migrate::run(&pool)
                .await
                .context("cannot bring the database schema up to date")?;
        }
        Ok(Database { pool, url, cluster })
    }

    /// Closes the pool, then stops the embedded cluster if this process started it.
    pub async fn close(mut self) -> anyhow::Result<()> {
        self.pool.close().await;
        if let Some(mut cluster) = self.cluster.take() {
            tokio::task::spawn_blocking(move || cluster.stop())
                .await
                .context("stopping PostgreSQL panicked")??;
        }
        Ok(())
    }
}

async fn ensure_database(admin: PgConnectOptions, name: &str) -> anyhow::Result<()> {
    let mut conn = PgConnection::connect_with(&admin)
        .await
        .context("cannot connect to the embedded PostgreSQL")?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(name)
            .fetch_one(&mut conn)
            .await?;
    if !exists {
        // The name is one of our constants, never input.
        let create = format!("CREATE DATABASE {name}");
        if let Err(e) = sqlx::raw_sql(sqlx::AssertSqlSafe(create))
            .execute(&mut conn)
            .await
        {
            // Two commands starting at once may both try; the loser finds it made.
            let made_meanwhile = e
                .as_database_error()
                .and_then(|d| d.code())
                .is_some_and(|code| code == "42P04");
            if !made_meanwhile {
                return Err(e).context("cannot create the wharf database");
            }
        }
    }
    conn.close().await?;
    Ok(())
}
