//! Connections the ingest writer commits on, held between commits rather than borrowed from a
//! pool.
//!
//! Owns: opening them, when one is checked before use, which one is kept after use, and
//! closing them. Must not know what is committed on them (see [`super::group`]).
//!
//! Why not a pool: sqlx's pool sends a round trip to the server before it hands a connection
//! out (`test_before_acquire`, on by default, as the application's pool has it) and another
//! whenever one comes back (always, whatever the options), so a lone envelope's store, one
//! round trip of its own, cost three. Held connections cost none of those: one stream went
//! ×1.15 in five rounds A-B (BENCHMARKS.md, 2026-12-07 evening).
//!
//! What the pool's two round trips were for, kept here another way:
//! - A connection is checked before use (a ping) when it has been idle for longer than
//!   [`IDLE_CHECK_AFTER_MS`]: the usual way a connection dies is a server restart or an idle
//!   timeout while nobody used it. One used a moment ago is not checked; if it died in that
//!   moment, its request is answered as any request whose server went away (503, safe to retry).
//! - A connection is kept only when its use ended cleanly outside any transaction. After any
//!   error, or with a transaction still open (a dropped one's `ROLLBACK` is only queued by
//!   sqlx), it is closed, which ends its session and so rolls back whatever it held: no lock
//!   is left waiting for the connection's next use.
//! - At most [`KEPT_MAX`] are kept; one more is closed, not kept.
//! - They follow the application's pool: opened as its connections are (server, credentials,
//!   application name, within its acquire timeout), and none is used or opened once it is
//!   closed, so an application that closed its pool commits nothing more.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection, PgPool};

/// Idle time after which a connection the ingest writer holds is pinged before it is used
/// (exported as `CONNECTION_IDLE_CHECK_AFTER_MS`). One used more recently is used unchecked.
pub const IDLE_CHECK_AFTER_MS: u64 = 1_000;
/// Connections kept at most (one per group that may commit at once).
const KEPT_MAX: usize = super::group::GROUPS_IN_FLIGHT;

/// Connections like `pool`'s, kept for the next commit.
///
/// Connections answer the runtime that opened them, so each runtime that commits needs a
/// `Held` of its own.
#[derive(Debug)]
pub(super) struct Held {
    /// The application's pool: how to connect, and whether it is closed.
    pool: PgPool,
    idle: Mutex<Vec<(PgConnection, Instant)>>,
}

impl Held {
    /// Connections as `pool` opens them, while `pool` is open.
    pub(super) fn new(pool: PgPool) -> Held {
        Held {
            pool,
            idle: Mutex::new(Vec::with_capacity(KEPT_MAX)),
        }
    }

    /// A connection to commit on: a kept one (pinged first when it has been idle a while), or a
    /// new one; `PoolClosed` once the application's pool is closed.
    pub(super) async fn take(&self) -> Result<PgConnection, sqlx::Error> {
        if self.pool.is_closed() {
            self.close_all().await;
            return Err(sqlx::Error::PoolClosed);
        }
        while let Some((mut conn, since)) = self.pop() {
            if since.elapsed() < Duration::from_millis(IDLE_CHECK_AFTER_MS) {
                return Ok(conn);
            }
            if conn.ping().await.is_ok() {
                return Ok(conn);
            }
            // Dead, or not worth finding out why: its session is gone or goes now.
            drop(conn);
        }
        tokio::time::timeout(
            self.pool.options().get_acquire_timeout(),
            PgConnection::connect_with(&self.pool.connect_options()),
        )
        .await
        .map_err(|_| sqlx::Error::PoolTimedOut)?
    }

    /// Takes `conn` back after a use; `clean` when that use ended without an error. Anything
    /// else is closed (see the module's doc).
    pub(super) fn give_back(&self, conn: PgConnection, clean: bool) {
        let conn = if clean && !conn.is_in_transaction() {
            match self.idle.lock() {
                Ok(mut idle) if idle.len() < KEPT_MAX => {
                    idle.push((conn, Instant::now()));
                    return;
                }
                _ => conn,
            }
        } else {
            conn
        };
        close(conn);
    }

    /// Closes every kept connection.
    pub(super) async fn close_all(&self) {
        while let Some((conn, _)) = self.pop() {
            let _ = conn.close().await;
        }
    }

    fn pop(&self) -> Option<(PgConnection, Instant)> {
        self.idle.lock().ok()?.pop()
    }
}

/// Ends `conn`'s session: politely when there is a runtime to do it on, else by dropping it
/// (the server sees the socket close, and rolls back what the session held).
fn close(conn: PgConnection) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            let _ = conn.close().await;
        });
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Ok(idle) = self.idle.get_mut() {
            for (conn, _) in idle.drain(..) {
                close(conn);
            }
        }
    }
}
