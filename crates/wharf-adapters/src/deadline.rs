//! A bound on provider I/O that still holds after the process was stopped.
//!
//! Owns: [`before`], which runs a future only while its deadline has not passed, looking at the
//! clock before every poll of the work it wraps. Must not know: SMTP, HTTP, or the outbox.
//!
//! Why not `tokio::time::timeout_at` alone: it polls the wrapped future first and looks at its
//! timer only when that future is still pending. A process stopped past its deadline (SIGSTOP, a
//! paused VM, a starved runtime thread) wakes with the timer expired *and* the provider's reply
//! ready; `timeout_at` lets the reply through, and the adapter's next write (an SMTP body, an
//! HTTP request) goes out after the lease may have passed to another replica, overlapping the
//! lane's next action (RELIABILITY.md, finding 1). Looking at the clock first narrows that
//! window to the time between the look and the write inside one poll; closing it entirely needs
//! a provider that checks a fencing token.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;

use tokio::time::Instant;

/// The deadline passed before the work finished. Nothing more of it ran after the deadline was
/// seen (a poll that had already begun may have finished its own write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expired;

/// Runs `work` until `deadline`: `Err(Expired)` once the deadline has passed, whether the timer
/// fired while `work` waited or the clock shows it passed when `work` is about to be polled.
pub(crate) async fn before<F: Future>(deadline: Instant, work: F) -> Result<F::Output, Expired> {
    let mut work = pin!(work);
    let checked = poll_fn(|cx| {
        if Instant::now() >= deadline {
            return Poll::Ready(Err(Expired));
        }
        work.as_mut().poll(cx).map(Ok)
    });
    tokio::time::timeout_at(deadline, checked)
        .await
        .unwrap_or(Err(Expired))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    /// What a stopped process sees when it resumes: the deadline is behind it and the work's
    /// next step is ready at once.
    #[tokio::test]
    async fn ready_work_past_its_deadline_is_not_run() {
        let deadline = Instant::now() + Duration::from_millis(20);
        std::thread::sleep(Duration::from_millis(40));

        // The behaviour this module exists for: timeout_at lets ready work through.
        let through = tokio::time::timeout_at(deadline, async { 7 }).await;
        assert_eq!(
            through.ok(),
            Some(7),
            "tokio's timeout polls the work first"
        );

        let ran = AtomicBool::new(false);
        let answer = before(deadline, async {
            ran.store(true, Ordering::SeqCst);
        })
        .await;
        assert_eq!(answer, Err(Expired));
        assert!(!ran.load(Ordering::SeqCst), "the work must not be polled");
    }

    #[tokio::test]
    async fn work_within_its_deadline_answers_and_slow_work_is_cut_off() {
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(before(deadline, async { 7 }).await, Ok(7));

        let soon = Instant::now() + Duration::from_millis(30);
        let slow = tokio::time::sleep(Duration::from_secs(5));
        let started = Instant::now();
        assert_eq!(before(soon, slow).await, Err(Expired));
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the timer still fires"
        );
    }

    /// Between two steps of the work the thread is blocked past the deadline: the second step
    /// does not run.
    #[tokio::test]
    async fn a_stop_between_two_steps_keeps_the_second_from_running() {
        let deadline = Instant::now() + Duration::from_millis(50);
        let second = AtomicBool::new(false);
        let answer = before(deadline, async {
            tokio::task::yield_now().await;
            std::thread::sleep(Duration::from_millis(80));
            tokio::task::yield_now().await;
            second.store(true, Ordering::SeqCst);
        })
        .await;
        assert_eq!(answer, Err(Expired));
        assert!(!second.load(Ordering::SeqCst));
    }
}
