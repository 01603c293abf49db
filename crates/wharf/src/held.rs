//! Connections held between uses rather than borrowed from a pool: the inbox writer's commits
//! and the executor's claims.
//!
//! Owns: opening them, when one is checked before use, which one is kept after use, and
//! closing them. Must not know what runs on them (see `inbox::group` and `outbox::executor`).
//!
//! Why not a pool: sqlx's pool sends a round trip to the server before it hands a connection
//! out (`test_before_acquire`, on by default, as the application's pool has it) and another
//! whenever one comes back (always, whatever the options). A lone envelope's store, one round
//! trip of its own, cost three: held connections made one stream ×1.15 in five rounds A-B
//! (BENCHMARKS.md, 2026-12-07 evening). A claim's connection came back only after that second
//! round trip, and the executor's next claim (one in flight by default) waited for it.
//!
//! What the pool's two round trips were for, kept here another way:
//! - A connection is checked before use (a ping) when it has been idle for longer than
//!   [`IDLE_CHECK_AFTER_MS`]: the usual way a connection dies is a server restart or an idle
//!   timeout while nobody used it. One used a moment ago is not checked; if it died in that
//!   moment, its use fails as any use whose server went away (the inbox answers 503, safe to
//!   retry; the executor's claim fails and is tried again).
//! - A connection is kept only when its use ended cleanly outside any transaction. After any
//!   other end, or with a transaction still open (a dropped one's `ROLLBACK` is only queued by
//!   sqlx), it is closed, which ends its session and so rolls back whatever it held: no lock
//!   is left waiting for the connection's next use.
//! - At most `kept_max` are kept; one more is closed, not kept.
//! - They follow a pool: opened within its acquire timeout, and none is used or opened once
//!   it is closed (so an application that closed its pool commits no more envelopes).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};

/// Idle time after which a held connection is pinged before it is used (exported as
/// `inbox::CONNECTION_IDLE_CHECK_AFTER_MS` and `outbox::CONNECTION_IDLE_CHECK_AFTER_MS`). One
/// used more recently is used unchecked.
pub const IDLE_CHECK_AFTER_MS: u64 = 1_000;

/// Connections opened with some options, kept for the next use.
///
/// Connections answer the runtime that opened them, so each runtime that uses them needs a
/// `Held` of its own.
#[derive(Debug)]
pub(crate) struct Held {
    /// The pool followed: its acquire timeout, and whether it is closed.
    follows: PgPool,
    options: PgConnectOptions,
    kept_max: usize,
    idle: Mutex<Vec<(PgConnection, Instant)>>,
}

impl Held {
    /// Connections as `pool` opens them, while `pool` is open; at most `kept_max` kept.
    pub(crate) fn like(pool: PgPool, kept_max: usize) -> Held {
        let options = (*pool.connect_options()).clone();
        Held::with_options(pool, options, kept_max)
    }

    /// Connections opened with `options`, within `follows`' acquire timeout and while it is
    /// open; at most `kept_max` kept.
    pub(crate) fn with_options(
        follows: PgPool,
        options: PgConnectOptions,
        kept_max: usize,
    ) -> Held {
        Held {
            follows,
            options,
            kept_max,
            idle: Mutex::new(Vec::with_capacity(kept_max)),
        }
    }

    /// A connection to use: a kept one (pinged first when it has been idle a while), or a new
    /// one; `PoolClosed` once the followed pool is closed.
    pub(crate) async fn take(&self) -> Result<PgConnection, sqlx::Error> {
        if self.follows.is_closed() {
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
            self.follows.options().get_acquire_timeout(),
            PgConnection::connect_with(&self.options),
        )
        .await
        .map_err(|_| sqlx::Error::PoolTimedOut)?
    }

    /// Takes `conn` back after a use; `clean` when that use ended without an error. Anything
    /// else is closed (see the module's doc).
    pub(crate) fn give_back(&self, conn: PgConnection, clean: bool) {
        let conn = if clean && !conn.is_in_transaction() {
            match self.idle.lock() {
                Ok(mut idle) if idle.len() < self.kept_max => {
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
    pub(crate) async fn close_all(&self) {
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
