//! Test support: real PostgreSQL for every test, never a mock.
//!
//! One server per test process: the database named by `DATABASE_URL` when it is set, otherwise
//! an ephemeral cluster started from the machine's PostgreSQL installation (removed when the
//! process ends, even when it is killed). Every test gets its own fresh database, cloned from a
//! template that was migrated once per migration set, so tests never share mutable state.
//!
//! ```no_run
//! # async fn example() {
//! let db = wharf_testkit::TestDb::new().await;
//! sqlx::query("SELECT 1").execute(&db.pool).await.unwrap();
//! # }
//! ```
//!
//! Must not know: any table. It only creates databases and runs wharf's migrations.

pub mod conformance;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};

/// Connections one test's pool may open. Tests run two at a time on this machine's 2 cores; a
/// handful of connections per test keeps the cluster well under its `max_connections`.
pub const TEST_POOL_CONNECTIONS_MAX: u32 = 8;

/// The server every test database of this process lives on.
struct Server {
    /// URL of a maintenance database on the server (where CREATE DATABASE runs).
    admin_url: String,
    /// Whether test databases are dropped after each test (a shared server) or left to vanish
    /// with the cluster (an ephemeral one).
    drop_databases: bool,
    /// Keeps the ephemeral cluster alive for the whole process.
    _cluster: Option<Mutex<wharf_pg::Cluster>>,
}

static SERVER: OnceLock<Server> = OnceLock::new();
static TEMPLATE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
static NEXT_DATABASE: AtomicU64 = AtomicU64::new(0);

fn server() -> &'static Server {
    SERVER.get_or_init(|| match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => Server {
            admin_url: url,
            drop_databases: true,
            _cluster: None,
        },
        _ => {
            let dir = std::env::temp_dir().join(format!(
                "wharf-test-{}-{}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default()
            ));
            let cluster = wharf_pg::Cluster::start(&wharf_pg::Options::ephemeral(&dir))
                .unwrap_or_else(|e| panic!("cannot start the test PostgreSQL cluster: {e}"));
            Server {
                admin_url: cluster.url("postgres"),
                drop_databases: false,
                _cluster: Some(Mutex::new(cluster)),
            }
        }
    })
}

/// Connection options for `database` on the test server: the server's own, database swapped.
fn options_for(database: &str) -> PgConnectOptions {
    server()
        .admin_url
        .parse::<PgConnectOptions>()
        .expect("DATABASE_URL is a valid PostgreSQL URL")
        .database(database)
}

/// The name of the migrated template for the current migrations, created on first use.
async fn template() -> &'static str {
    TEMPLATE
        .get_or_init(|| async {
            let mut hasher = Sha256::new();
            for migration in wharf::migrate::migrator().iter() {
                hasher.update(migration.version.to_be_bytes());
                hasher.update(&*migration.checksum);
            }
            let name = format!("wharf_tpl_{}", &hex::encode(hasher.finalize())[..16]);
            let mut admin = PgConnection::connect(&server().admin_url)
                .await
                .expect("connect to the test server");
            // Several test processes may share one DATABASE_URL: build each template once.
            sqlx::query("SELECT pg_advisory_lock(4242)")
                .execute(&mut admin)
                .await
                .expect("take the template lock");
            let exists: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
                    .bind(&name)
                    .fetch_one(&mut admin)
                    .await
                    .expect("look up the template");
            if !exists {
                // Build under a temporary name and rename at the end, so an interrupted build
                // never leaves a half-migrated template behind a good name.
                let building = format!("{name}_building");
                exec(
                    &mut admin,
                    &format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"),
                )
                .await;
                exec(&mut admin, &format!("CREATE DATABASE {building}")).await;
                let pool = PgPoolOptions::new()
                    .max_connections(1)
                    .connect_with(options_for(&building))
                    .await
                    .expect("connect to the template");
                wharf::migrate::run(&pool)
                    .await
                    .expect("migrate the template");
                pool.close().await;
                exec(
                    &mut admin,
                    &format!("ALTER DATABASE {building} RENAME TO {name}"),
                )
                .await;
            }
            sqlx::query("SELECT pg_advisory_unlock(4242)")
                .execute(&mut admin)
                .await
                .expect("release the template lock");
            let _ = admin.close().await;
            name
        })
        .await
}

async fn exec(conn: &mut PgConnection, sql: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// `url` with its database swapped for `database`, keeping everything else (credentials,
/// host, query parameters) as written, so libpq tools such as `pg_dump` accept it too.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    let mut out = format!("{}/{database}", &base[..path_start]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// A fresh, migrated database of its own for one test.
pub struct TestDb {
    /// A pool on the test's database.
    pub pool: PgPool,
    name: String,
}

impl TestDb {
    /// Clones the migrated template into a new database and opens a pool on it.
    pub async fn new() -> TestDb {
        let template = template().await;
        let name = format!(
            "wharf_test_{}_{}",
            std::process::id(),
            NEXT_DATABASE.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = PgConnection::connect(&server().admin_url)
            .await
            .expect("connect to the test server");
        exec(
            &mut admin,
            &format!("CREATE DATABASE {name} TEMPLATE {template}"),
        )
        .await;
        let _ = admin.close().await;
        let pool = TestDb::pool_on(&name, TEST_POOL_CONNECTIONS_MAX).await;
        TestDb { pool, name }
    }

    async fn pool_on(name: &str, connections_max: u32) -> PgPool {
        PgPoolOptions::new()
            .max_connections(connections_max)
            .connect_with(options_for(name))
            .await
            .expect("connect to the test database")
    }

    /// Another, independent pool on the same database: a second replica, as far as wharf can
    /// tell.
    pub async fn another_pool(&self, connections_max: u32) -> PgPool {
        TestDb::pool_on(&self.name, connections_max).await
    }

    /// The connection URL of this test's database (for a child process such as the `wharf`
    /// binary).
    pub fn url(&self) -> String {
        with_database(&server().admin_url, &self.name)
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if !server().drop_databases {
            // The ephemeral cluster goes away as a whole when the process ends.
            return;
        }
        let name = self.name.clone();
        let admin_url = server().admin_url.clone();
        // Drop runs inside the test's runtime; a fresh thread with its own runtime may block.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime to drop the test database");
            runtime.block_on(async {
                if let Ok(mut admin) = PgConnection::connect(&admin_url).await {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut admin)
                        .await;
                    let _ = admin.close().await;
                }
            });
        })
        .join();
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn database_names_are_swapped_and_nothing_else() {
        let check = |url: &str, expected: &str| assert_eq!(with_database(url, "t1"), expected);
        check(
            "postgres://u:p@127.0.0.1:5432/postgres",
            "postgres://u:p@127.0.0.1:5432/t1",
        );
        check("postgres://u@localhost", "postgres://u@localhost/t1");
        check(
            "postgres:///test?host=/run/pg",
            "postgres:///t1?host=/run/pg",
        );
        check(
            "postgresql://h/db?sslmode=disable",
            "postgresql://h/t1?sslmode=disable",
        );
    }
}
