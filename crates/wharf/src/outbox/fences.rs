//! Fence batching: fences asked at the same moment share one statement and one commit.
//!
//! Owns: the queue of waiting fences and the statements that answer them. Must not know what
//! an attempt does with the answer ([`super::attempt`] decides that) or how results are
//! recorded.
//!
//! Why: every attempt must see its own fence committed before its provider call, so a fence is
//! a commit (an fsync) on the path of every action. The attempts of one claim reach their fences
//! within microseconds of each other; one statement answering all of them turns N commits into
//! one. No attempt waits for another's provider call, only for the statement that holds its own
//! row: each row is still decided on its own (id, epoch) and lease (`begin_write.sql`).
//!
//! Up to [`FENCE_STATEMENTS_MAX`] statements run at once; fences asked while all of them run
//! wait and go together in the next one, which is what makes batches form under load without a
//! timer (a lone fence never waits for company).
//!
//! Every fence the executor asks goes through here, under [`Executor::run`] and under
//! [`Executor::run_once_at`] alike, so tests that move a test clock exercise this batcher too.
//! The clock travels with each ask; asks on different clocks never share a statement.
//!
//! [`Executor::run`]: super::Executor::run
//! [`Executor::run_once_at`]: super::Executor::run_once_at

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::store;

/// Fences one statement answers. The same bound as a claim, for the same reason: it bounds the
/// statement's locks.
pub(crate) const FENCE_BATCH_MAX: usize = 100;
/// Fence statements running at once. Two keep the pipe full while one commits; more would only
/// split batches and add commits.
pub(crate) const FENCE_STATEMENTS_MAX: usize = 2;
/// Fences waiting for a statement. Bounded like everything else; an attempt that finds the
/// queue full waits for room (backpressure), it never fails for it.
const FENCE_QUEUE_MAX: usize = 1_024;

/// The answer to one fence: passed or refused, or the statement's error (shared by the batch).
pub(crate) type FenceAnswer = Result<bool, Arc<sqlx::Error>>;

struct FenceAsk {
    id: i64,
    epoch: i64,
    /// The clock the fence is decided on: `None` is the database's, `Some` a test clock.
    now: Option<DateTime<Utc>>,
    reply: oneshot::Sender<FenceAnswer>,
}

/// A handle to the batcher. Clones share it; the batcher stops when the last clone is dropped.
#[derive(Clone)]
pub(crate) struct Fences {
    tx: mpsc::Sender<FenceAsk>,
}

impl std::fmt::Debug for Fences {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fences").finish_non_exhaustive()
    }
}

impl Fences {
    /// Starts a batcher on `pool` with the executor's fence margin. It runs until every handle
    /// is dropped.
    pub(crate) fn start(pool: PgPool, fence_margin_ms: u64) -> Fences {
        let (tx, rx) = mpsc::channel(FENCE_QUEUE_MAX);
        tokio::spawn(answer_loop(pool, fence_margin_ms, rx));
        Fences { tx }
    }

    /// Asks the fence of (id, epoch) on the clock `now` (`None`: the database's). `None` means
    /// the batcher is gone and the fence was not asked (the caller asks the database itself); a
    /// reply lost after the ask was sent is an error, because the statement may have run.
    pub(crate) async fn ask(
        &self,
        id: i64,
        epoch: i64,
        now: Option<DateTime<Utc>>,
    ) -> Option<FenceAnswer> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(FenceAsk {
                id,
                epoch,
                now,
                reply,
            })
            .await
            .ok()?;
        Some(
            answer
                .await
                .unwrap_or_else(|_| Err(Arc::new(sqlx::Error::WorkerCrashed))),
        )
    }
}

async fn answer_loop(pool: PgPool, fence_margin_ms: u64, mut rx: mpsc::Receiver<FenceAsk>) {
    let statements = Arc::new(Semaphore::new(FENCE_STATEMENTS_MAX));
    while let Some(first) = rx.recv().await {
        // Wait for a free statement first: fences asked meanwhile join this batch.
        let Ok(permit) = statements.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < FENCE_BATCH_MAX {
            match rx.try_recv() {
                Ok(more) => batch.push(more),
                Err(_) => break,
            }
        }
        let pool = pool.clone();
        tokio::spawn(async move {
            for same_clock in by_clock(batch) {
                answer(&pool, fence_margin_ms, same_clock).await;
            }
            drop(permit);
        });
    }
}

/// Splits a batch into the asks of each clock, in the order the clocks first appear: one
/// statement decides on one clock. The executor's asks all share one clock, so this is one part.
fn by_clock(batch: Vec<FenceAsk>) -> Vec<Vec<FenceAsk>> {
    let mut parts: Vec<Vec<FenceAsk>> = Vec::new();
    for ask in batch {
        match parts.iter_mut().find(|p| p[0].now == ask.now) {
            Some(part) => part.push(ask),
            None => parts.push(vec![ask]),
        }
    }
    parts
}

/// Answers asks that share one clock with one statement.
async fn answer(pool: &PgPool, fence_margin_ms: u64, mut batch: Vec<FenceAsk>) {
    let now = batch[0].now;
    // Rows in id order, as every other multi-row statement takes them.
    batch.sort_by_key(|a| a.id);
    let ids: Vec<i64> = batch.iter().map(|a| a.id).collect();
    let epochs: Vec<i64> = batch.iter().map(|a| a.epoch).collect();
    match store::outbox::begin_write_many(pool, &ids, &epochs, fence_margin_ms, now).await {
        Ok(passed) => {
            for ask in batch {
                // The asker may have been cut off meanwhile; its attempt counts the fence as
                // maybe passed, which is what it may be.
                let _ = ask.reply.send(Ok(passed.contains(&ask.id)));
            }
        }
        Err(e) => {
            let e = Arc::new(e);
            for ask in batch {
                let _ = ask.reply.send(Err(e.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(id: i64, now: Option<DateTime<Utc>>) -> FenceAsk {
        let (reply, _) = oneshot::channel();
        FenceAsk {
            id,
            epoch: 1,
            now,
            reply,
        }
    }

    #[test]
    fn a_batch_is_split_by_clock_keeping_each_clocks_asks_in_order() {
        let t = DateTime::from_timestamp(1_700_000_000, 0);
        let batch = vec![
            ask(5, None),
            ask(3, t),
            ask(4, None),
            ask(1, t),
            ask(2, None),
        ];
        let parts: Vec<(Option<DateTime<Utc>>, Vec<i64>)> = by_clock(batch)
            .into_iter()
            .map(|p| (p[0].now, p.iter().map(|a| a.id).collect()))
            .collect();
        assert_eq!(parts, vec![(None, vec![5, 4, 2]), (t, vec![3, 1])]);
    }

    #[test]
    fn asks_on_one_clock_stay_one_statement() {
        let parts = by_clock(
            (0..FENCE_BATCH_MAX as i64)
                .map(|id| ask(id, None))
                .collect(),
        );
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].len(), FENCE_BATCH_MAX);
    }
}
