//! How a command reaches its database: the URL it was given, or wharf's own cluster under
//! `<data-dir>/pg`, created on first use and kept between runs.
//!
//! Long-running commands (`serve`, `work`) wait for a database that does not answer yet — one
//! restarting, failing over, or not started — instead of exiting: every attempt that fails for
//! a reason that can pass (connection refused or reset, "the database system is starting up",
//! too many connections, a timeout) is logged with the host and port and retried with capped,
//! jittered backoff until the start-up deadline ([`Wait`]). A reason that cannot pass (a wrong
//! password, a database that does not exist, a URL that does not parse) fails at once. Admin
//! commands try once.
//!
//! The schema: `serve`, `work` and `migrate` bring it up to date. Admin commands do too on the
//! embedded cluster (it is wharf's own, so a fresh `--data-dir` just works); against a
//! configured URL they do not change the schema, and one that is missing or older than this
//! binary is refused with "run `wharf migrate`" instead of a failing query.
//!
//! Every connection names its command in `application_name` (`wharf serve`, `wharf work`,
//! `wharf restore`, `wharf` for the rest), so `pg_stat_activity` tells an operator, and
//! `wharf restore`, which wharf processes use a database.

use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};
use wharf_core::backoff::Backoff;

use crate::config::Config;

/// The database the embedded cluster keeps wharf's schema in.
pub const EMBEDDED_DATABASE: &str = "wharf";

/// The `application_name` of `wharf serve`'s connections, as `pg_stat_activity` shows them.
pub const APPLICATION_SERVE: &str = "wharf serve";
/// The `application_name` of `wharf work`'s connections.
pub const APPLICATION_WORK: &str = "wharf work";
/// The `application_name` of `wharf restore`'s own connections.
pub const APPLICATION_RESTORE: &str = "wharf restore";
/// The `application_name` of every other command's connections.
pub const APPLICATION_ADMIN: &str = "wharf";
/// The names of connections that run actions or answer the API: a restore must not swap the
/// schema under them. The executor's statement pool names itself (in the library, so an
/// application's embedded executor is found too).
pub const APPLICATIONS_RUNNING: [&str; 3] = [APPLICATION_SERVE, APPLICATION_WORK, "wharf executor"];

/// The first retry's delay. Short: a database that refused one connection during a restart
/// often takes the next one a moment later.
pub const STARTUP_RETRY_MS_MIN: u64 = 250;
/// The start-up deadline when nothing else is said: five minutes covers a PostgreSQL restart
/// or a managed failover (typically 30–120 s), and a wrong address still fails within minutes.
pub const STARTUP_DEADLINE_MS_DEFAULT: u64 = 300_000;
/// The largest start-up deadline accepted: a day. Larger is a typo, not a plan.
pub const STARTUP_DEADLINE_MS_MAX: u64 = 86_400_000;
/// The longest wait between two attempts by default: a database that comes back is found
/// within five seconds, and a long outage costs one log line every five seconds.
pub const STARTUP_RETRY_MS_MAX_DEFAULT: u64 = 5_000;
/// The largest `retry_ms_max` accepted.
pub const STARTUP_RETRY_MS_MAX_LIMIT: u64 = 60_000;
/// How long one connection attempt may take before it counts as failed (a host that drops
/// packets instead of refusing).
pub const CONNECT_ATTEMPT_MS_MAX: u64 = 10_000;

/// How a command waits for its database at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// The total time all attempts may take; 0 means one attempt.
    pub deadline_ms: u64,
    /// The longest pause between two attempts.
    pub retry_ms_max: u64,
}

impl Wait {
    /// One attempt, no waiting: what admin commands do.
    pub const ONCE: Wait = Wait {
        deadline_ms: 0,
        retry_ms_max: STARTUP_RETRY_MS_MIN,
    };

    /// The `[startup]` table (`deadline_ms`, `retry_ms_max`), under a command-line deadline.
    pub fn from_config(config: &Config, deadline_ms: Option<u64>) -> anyhow::Result<Wait> {
        let section: StartupSection = config.section("startup")?;
        let wait = Wait {
            deadline_ms: deadline_ms
                .or(section.deadline_ms)
                .unwrap_or(STARTUP_DEADLINE_MS_DEFAULT),
            retry_ms_max: section.retry_ms_max.unwrap_or(STARTUP_RETRY_MS_MAX_DEFAULT),
        };
        if wait.deadline_ms > STARTUP_DEADLINE_MS_MAX {
            anyhow::bail!(
                "invalid [startup] configuration: deadline_ms must be at most {STARTUP_DEADLINE_MS_MAX}, is {}",
                wait.deadline_ms
            );
        }
        if !(STARTUP_RETRY_MS_MIN..=STARTUP_RETRY_MS_MAX_LIMIT).contains(&wait.retry_ms_max) {
            anyhow::bail!(
                "invalid [startup] configuration: retry_ms_max must be {STARTUP_RETRY_MS_MIN}..={STARTUP_RETRY_MS_MAX_LIMIT}, is {}",
                wait.retry_ms_max
            );
        }
        Ok(wait)
    }

    fn backoff(&self) -> Backoff {
        Backoff {
            base_ms: STARTUP_RETRY_MS_MIN,
            factor: 2,
            cap_ms: self.retry_ms_max,
            jitter_percent: 20,
        }
    }
}

/// The `[startup]` table.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StartupSection {
    deadline_ms: Option<u64>,
    retry_ms_max: Option<u64>,
}

/// A command's database, and the embedded cluster behind it when there is one.
pub struct Database {
    /// The pool every library call takes.
    pub pool: PgPool,
    /// The URL as libpq tools (`pg_dump`, `pg_restore`) take it.
    pub url: String,
    /// The migrations this open applied, `<version>_<description>`, oldest first.
    pub applied: Vec<String>,
    /// How many migrations the schema has now.
    pub schema_migrations: usize,
    cluster: Option<wharf_pg::Cluster>,
}

/// What a command needs of its database.
#[derive(Debug, Clone, Copy)]
pub struct Open {
    /// Run the migrations first (serve, work, migrate). Without: migrate anyway on the
    /// embedded cluster; on a configured URL, refuse a missing or older schema.
    pub migrate: bool,
    /// Connections the pool may hold.
    pub connections_max: u32,
    /// How long to wait for a database that does not answer yet.
    pub wait: Wait,
}

impl Open {
    /// What most admin commands need: an up-to-date schema is not their job, two connections,
    /// one attempt.
    pub const ADMIN: Open = Open {
        migrate: false,
        connections_max: 2,
        wait: Wait::ONCE,
    };
}

/// What [`Database::open`] does to the schema beside [`Open::migrate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Schema {
    /// Migrate, or check that it is up to date (see [`Open::migrate`]).
    Checked,
    /// Take it as it is, even absent: `wharf restore` writes one.
    AsIs,
}

/// What a command's connections are called.
#[derive(Debug, Clone, Copy)]
struct Names {
    /// The database on the embedded cluster (a configured URL names its own).
    embedded_database: &'static str,
    /// The `application_name` every connection of the pool shows.
    application: &'static str,
}

/// Attempts in a row on which a connection answered with something other than PostgreSQL's
/// protocol before that counts as a wrong address. A server that is down on a port
/// in the ephemeral range can make a connect succeed to itself (a TCP self-connect: the client
/// reads its own SSLRequest back, "unexpected response from SSLRequest: 0x00"), which the
/// fault suite saw during PostgreSQL restarts; something else listening there answers the same
/// way every time, and is still reported within a few seconds.
const GARBLED_CONNECT_ATTEMPTS_MAX: u32 = 5;

/// Why one attempt failed, and whether another can help.
struct Failed {
    error: anyhow::Error,
    transient: bool,
    /// The connection itself failed (not a query or a migration on it).
    connecting: bool,
    /// The peer did not speak PostgreSQL's protocol (see [`GARBLED_CONNECT_ATTEMPTS_MAX`]).
    garbled: bool,
}

impl Failed {
    /// A query or a migration that failed. Its pool may have opened a new connection for it,
    /// and that connect may have met the same garbage as a first connect does (the fault suite
    /// saw a worker exit at its migrations with "unexpected response from SSLRequest" while
    /// PostgreSQL restarted), so a protocol error counts as garbled here too.
    fn sqlx(error: sqlx::Error, context: &'static str) -> Failed {
        Failed {
            transient: transient(&error),
            garbled: garbled(&error),
            error: anyhow::Error::new(error).context(context),
            connecting: false,
        }
    }

    /// A connection that could not be made. No context of its own: the caller names the
    /// target. A refused connection is said plainly, with what to check.
    fn connect(error: sqlx::Error) -> Failed {
        let refused = matches!(&error, sqlx::Error::Io(io)
            if io.kind() == std::io::ErrorKind::ConnectionRefused);
        Failed {
            garbled: garbled(&error),
            transient: transient(&error),
            error: if refused {
                anyhow::anyhow!(
                    "connection refused: nothing listens there (is PostgreSQL running, and are \
                     the URL's host and port right?)"
                )
            } else {
                anyhow::Error::new(error)
            },
            connecting: true,
        }
    }
}

/// Whether a connect-phase error can pass by itself.
fn transient(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // connection exceptions, too_many_connections, admin/crash shutdown,
            // cannot_connect_now ("the database system is starting up")
            code.starts_with("08") || matches!(&*code, "53300" | "57P01" | "57P02" | "57P03")
        }),
        sqlx::Error::Migrate(e) => match &**e {
            sqlx::migrate::MigrateError::Execute(inner)
            | sqlx::migrate::MigrateError::ExecuteMigration(inner, _) => transient(inner),
            _ => false,
        },
        _ => false,
    }
}

/// Whether the peer answered with something other than PostgreSQL's protocol (see
/// [`GARBLED_CONNECT_ATTEMPTS_MAX`]), directly or inside a migration's error.
fn garbled(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Protocol(_) => true,
        sqlx::Error::Migrate(e) => match &**e {
            sqlx::migrate::MigrateError::Execute(inner)
            | sqlx::migrate::MigrateError::ExecuteMigration(inner, _) => garbled(inner),
            _ => false,
        },
        _ => false,
    }
}

/// Where the options point, for messages: `host:port` or the socket.
pub fn target(options: &PgConnectOptions) -> String {
    match options.get_socket() {
        Some(socket) => format!("{} (port {})", socket.display(), options.get_port()),
        None => format!("{}:{}", options.get_host(), options.get_port()),
    }
}

impl Database {
    /// Connects (starting the embedded cluster if no URL is configured).
    pub async fn open(config: &Config, open: Open) -> anyhow::Result<Database> {
        Database::open_named(config, open, EMBEDDED_DATABASE, &|_| {}).await
    }

    /// As [`Database::open`], but neither migrating nor checking the schema: for `wharf
    /// restore`, which brings its own.
    pub async fn open_as_is(config: &Config, open: Open) -> anyhow::Result<Database> {
        let names = Names {
            embedded_database: EMBEDDED_DATABASE,
            application: APPLICATION_RESTORE,
        };
        Database::open_with(config, open, names, &|_| {}, Schema::AsIs).await
    }

    /// As [`Database::open`], for a long-running command: its connections are named
    /// `application` in `pg_stat_activity` (one of [`APPLICATIONS_RUNNING`], so `wharf
    /// restore` finds them), and `waiting` is told what it waits for each time an attempt
    /// failed.
    pub async fn open_running(
        config: &Config,
        open: Open,
        application: &'static str,
        waiting: &(dyn Fn(&str) + Sync),
    ) -> anyhow::Result<Database> {
        let names = Names {
            embedded_database: EMBEDDED_DATABASE,
            application,
        };
        Database::open_with(config, open, names, waiting, Schema::Checked).await
    }

    /// As [`Database::open`], but on the embedded cluster uses (and creates) the database
    /// `embedded_database` instead of `wharf` — benchmarks keep their rows out of the one
    /// `wharf serve` uses. A configured URL is used as it is.
    pub async fn open_named(
        config: &Config,
        open: Open,
        embedded_database: &'static str,
        waiting: &(dyn Fn(&str) + Sync),
    ) -> anyhow::Result<Database> {
        let names = Names {
            embedded_database,
            application: APPLICATION_ADMIN,
        };
        Database::open_with(config, open, names, waiting, Schema::Checked).await
    }

    async fn open_with(
        config: &Config,
        mut open: Open,
        names: Names,
        waiting: &(dyn Fn(&str) + Sync),
        schema: Schema,
    ) -> anyhow::Result<Database> {
        let embedded_database = names.embedded_database;
        let embedded = config.database_url.is_none();
        // The embedded cluster is wharf's own: every command keeps its schema current.
        open.migrate = schema == Schema::Checked && (open.migrate || embedded);
        let check = schema == Schema::Checked && !open.migrate;
        let (options, url, cluster, admin) = match &config.database_url {
            Some(url) => {
                let options: PgConnectOptions = url
                    .parse()
                    .context("the database URL is not a valid PostgreSQL URL")?;
                (options, url.clone(), None, None)
            }
            None => {
                let dir = config.data_dir.join("pg");
                waiting(&format!(
                    "starting the embedded PostgreSQL under {}",
                    dir.display()
                ));
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
                    joined = ?cluster.joined(),
                    "embedded PostgreSQL ready"
                );
                let admin: PgConnectOptions = cluster.url("postgres").parse()?;
                let url = cluster.url(embedded_database);
                (
                    admin.clone().database(embedded_database),
                    url,
                    Some(cluster),
                    Some(admin),
                )
            }
        };
        let options = options
            .log_statements(tracing::log::LevelFilter::Off)
            .application_name(names.application);
        let target = target(&options);
        let wait = open.wait;
        let started = Instant::now();
        let backoff = wait.backoff();
        let mut attempt: u32 = 0;
        let mut garbled_in_a_row: u32 = 0;
        let (pool, applied, schema_migrations) = loop {
            attempt += 1;
            let tried = async {
                if let Some(admin) = &admin {
                    ensure_database(admin.clone(), embedded_database).await?;
                }
                attempt_open(&options, open).await
            };
            let failed = match tried.await {
                Ok(opened) => break opened,
                Err(failed) => failed,
            };
            let elapsed_ms = started.elapsed().as_millis() as u64;
            let left_ms = wait.deadline_ms.saturating_sub(elapsed_ms);
            garbled_in_a_row = if failed.garbled {
                garbled_in_a_row + 1
            } else {
                0
            };
            let transient = failed.transient
                || (failed.garbled && garbled_in_a_row < GARBLED_CONNECT_ATTEMPTS_MAX);
            if !transient {
                let what = if failed.connecting {
                    "cannot connect to PostgreSQL at"
                } else {
                    "PostgreSQL at"
                };
                return Err(failed.error.context(format!("{what} {target}")));
            }
            if wait.deadline_ms == 0 {
                // One attempt (admin commands): no deadline to speak of.
                let what = if failed.connecting {
                    "cannot connect to PostgreSQL at"
                } else {
                    "PostgreSQL at"
                };
                return Err(failed.error.context(format!("{what} {target}")));
            }
            if left_ms == 0 {
                let error = failed.error.context(format!(
                    "cannot connect to PostgreSQL at {target}: no answer within the start-up deadline \
                     of {} ms ({attempt} attempt(s))",
                    wait.deadline_ms
                ));
                return Err(error);
            }
            let draw = rand::Rng::gen_range(&mut rand::thread_rng(), -1.0..=1.0);
            let pause_ms = backoff.delay_ms(attempt, draw).min(left_ms).max(1);
            let error = crate::report::chain(&failed.error);
            tracing::warn!(
                target = %target,
                attempt,
                retry_in_ms = pause_ms,
                deadline_left_ms = left_ms,
                error = %error,
                "waiting for PostgreSQL"
            );
            waiting(&format!(
                "waiting for PostgreSQL at {target} (attempt {attempt}: {error})"
            ));
            tokio::time::sleep(Duration::from_millis(pause_ms)).await;
        };
        if attempt > 1 {
            tracing::info!(
                target = %target,
                attempts = attempt,
                waited_ms = started.elapsed().as_millis() as u64,
                "PostgreSQL answered"
            );
        }
        if check && let Err(e) = check_schema(&pool, &target).await {
            pool.close().await;
            return Err(e);
        }
        Ok(Database {
            pool,
            url,
            applied,
            schema_migrations,
            cluster,
        })
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

/// The versions recorded as applied in wharf's migration table; none when it does not exist.
async fn applied_versions(pool: &PgPool) -> Result<Vec<i64>, sqlx::Error> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(wharf::migrate::MIGRATIONS_TABLE)
        .fetch_one(pool)
        .await?;
    if !exists {
        return Ok(Vec::new());
    }
    // The table name is a constant of ours, never input.
    let sql = format!(
        "SELECT version FROM {} WHERE success ORDER BY version",
        wharf::migrate::MIGRATIONS_TABLE
    );
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await
}

fn migration_name(m: &sqlx::migrate::Migration) -> String {
    format!("{:04}_{}", m.version, m.description.replace(' ', "_"))
}

/// Refuses a schema that is missing or older than this binary's migrations, saying what to run.
async fn check_schema(pool: &PgPool, target: &str) -> anyhow::Result<()> {
    let applied = applied_versions(pool)
        .await
        .with_context(|| format!("cannot read the wharf schema's version at {target}"))?;
    let migrator = wharf::migrate::migrator();
    let missing: Vec<String> = migrator
        .iter()
        .filter(|m| m.migration_type.is_up_migration() && !applied.contains(&m.version))
        .map(migration_name)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if applied.is_empty() {
        anyhow::bail!(
            "the database at {target} has no wharf schema yet: run `wharf migrate` with the same \
             --database-url (or DATABASE_URL) first"
        );
    }
    anyhow::bail!(
        "the wharf schema at {target} is older than this wharf ({} migration(s) not applied: {}): \
         run `wharf migrate` with the same --database-url (or DATABASE_URL) first",
        missing.len(),
        missing.join(", ")
    )
}

/// One attempt: a probe connection (which reports the real error, where a pool would retry
/// a refused connection silently until its own timeout), then the pool, then the migrations.
/// Returns the pool, the migrations it applied and how many the schema has.
async fn attempt_open(
    options: &PgConnectOptions,
    open: Open,
) -> Result<(PgPool, Vec<String>, usize), Failed> {
    let attempt = Duration::from_millis(CONNECT_ATTEMPT_MS_MAX);
    let probe = tokio::time::timeout(attempt, PgConnection::connect_with(options))
        .await
        .map_err(|_| Failed {
            error: anyhow::anyhow!("no answer within {CONNECT_ATTEMPT_MS_MAX} ms"),
            transient: true,
            connecting: true,
            garbled: false,
        })?
        .map_err(Failed::connect)?;
    let _ = probe.close().await;
    let pool = PgPoolOptions::new()
        .max_connections(open.connections_max)
        .acquire_timeout(attempt)
        .connect_with(options.clone())
        .await
        .map_err(Failed::connect)?;
    if !open.migrate {
        return Ok((pool, Vec::new(), 0));
    }
    let migrated = async {
        let before = applied_versions(&pool).await?;
        wharf::migrate::run(&pool)
            .await
            .map_err(|e| sqlx::Error::Migrate(Box::new(e)))?;
        let after = applied_versions(&pool).await?;
        let migrator = wharf::migrate::migrator();
        let applied = migrator
            .iter()
            .filter(|m| after.contains(&m.version) && !before.contains(&m.version))
            .map(migration_name)
            .collect::<Vec<_>>();
        Ok::<_, sqlx::Error>((applied, after.len()))
    }
    .await;
    match migrated {
        Ok((applied, total)) => {
            if !applied.is_empty() {
                tracing::info!(applied = ?applied, "brought the database schema up to date");
            }
            Ok((pool, applied, total))
        }
        Err(e) => {
            pool.close().await;
            Err(Failed::sqlx(
                e,
                "cannot bring the database schema up to date",
            ))
        }
    }
}

async fn ensure_database(admin: PgConnectOptions, name: &str) -> Result<(), Failed> {
    let connect = |e| Failed::sqlx(e, "cannot connect to the embedded PostgreSQL");
    let mut conn = PgConnection::connect_with(&admin).await.map_err(connect)?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(name)
            .fetch_one(&mut conn)
            .await
            .map_err(connect)?;
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
                return Err(Failed::sqlx(e, "cannot create the wharf database"));
            }
        }
    }
    let _ = conn.close().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_passing_troubles_are_retried() {
        let io = |kind| sqlx::Error::Io(std::io::Error::from(kind));
        assert!(transient(&io(std::io::ErrorKind::ConnectionRefused)));
        assert!(transient(&io(std::io::ErrorKind::ConnectionReset)));
        assert!(transient(&sqlx::Error::PoolTimedOut));
        assert!(!transient(&sqlx::Error::Configuration("bad".into())));
        assert!(!transient(&sqlx::Error::Protocol("not postgres".into())));
        let migrate = |inner| sqlx::Error::Migrate(Box::new(inner));
        assert!(transient(&migrate(sqlx::migrate::MigrateError::Execute(
            io(std::io::ErrorKind::ConnectionReset)
        ))));
        assert!(!transient(&migrate(
            sqlx::migrate::MigrateError::VersionMismatch(3)
        )));
    }

    #[test]
    fn garbage_from_the_peer_is_garbled_in_a_connect_a_query_or_a_migration() {
        let protocol = || sqlx::Error::Protocol("unexpected response from SSLRequest: 0x00".into());
        let migrate = |inner| sqlx::Error::Migrate(Box::new(inner));
        assert!(garbled(&protocol()));
        assert!(garbled(&migrate(sqlx::migrate::MigrateError::Execute(
            protocol()
        ))));
        assert!(!garbled(&sqlx::Error::PoolTimedOut));
        assert!(!garbled(&migrate(sqlx::migrate::MigrateError::Execute(
            sqlx::Error::PoolTimedOut
        ))));
        // Each way an attempt fails keeps the mark, so the start-up loop retries it a bounded
        // number of times instead of giving up at the first one.
        assert!(Failed::connect(protocol()).garbled);
        assert!(Failed::sqlx(protocol(), "cannot bring the database schema up to date").garbled);
        assert!(
            Failed::sqlx(
                migrate(sqlx::migrate::MigrateError::Execute(protocol())),
                "cannot bring the database schema up to date"
            )
            .garbled
        );
        assert!(!Failed::sqlx(sqlx::Error::RowNotFound, "a query").garbled);
    }

    #[test]
    fn backoff_starts_short_and_stays_under_its_cap() {
        let wait = Wait {
            deadline_ms: 60_000,
            retry_ms_max: 5_000,
        };
        let b = wait.backoff();
        assert_eq!(b.delay_ms(1, 0.0), STARTUP_RETRY_MS_MIN);
        assert_eq!(b.delay_ms(2, 0.0), 2 * STARTUP_RETRY_MS_MIN);
        for attempt in 1..100 {
            for draw in [-1.0, 0.0, 1.0] {
                assert!(b.delay_ms(attempt, draw) <= 5_000);
            }
        }
    }
}
