//! Graceful shutdown: one stop signal for the whole process, raised by SIGINT (Ctrl-C), SIGTERM
//! or a part that failed.
//!
//! The signal handlers are registered when the [`Stop`] is made, not when something first waits
//! on it: tokio delivers a signal only to listeners that existed when it arrived, so a listener
//! made later (after the database opened, say) would miss a SIGTERM sent in between and the
//! process would run on as if never asked to stop.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// One stop signal, many listeners: the HTTP server and the executor stop together, whether
/// the operator asked (SIGINT/SIGTERM) or one of them failed. Once raised it stays raised, so a
/// listener that starts waiting afterwards returns at once.
#[derive(Clone)]
pub struct Stop {
    tx: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
    rx: tokio::sync::watch::Receiver<bool>,
}

impl Stop {
    /// Registers for SIGINT and SIGTERM now, and raises the stop when either comes.
    pub fn on_signal() -> anyhow::Result<Stop> {
        use anyhow::Context as _;
        let interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
        let terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
        let (tx, rx) = tokio::sync::watch::channel(false);
        let stop = Stop {
            tx: std::sync::Arc::new(tx),
            rx,
        };
        let trigger = stop.clone();
        tokio::spawn(async move {
            first_of(interrupt, terminate).await;
            tracing::info!("shutting down");
            trigger.trigger();
        });
        Ok(stop)
    }

    /// Stops everything that waits on this signal.
    pub fn trigger(&self) {
        let _ = self.tx.send(true);
    }

    /// Completes once the stop signal came (at once if it already had).
    pub async fn wait(mut self) {
        let _ = self.rx.wait_for(|stopped| *stopped).await;
    }
}

async fn first_of(mut interrupt: Signal, mut terminate: Signal) {
    tokio::select! {
        _ = interrupt.recv() => {},
        _ = terminate.recv() => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The regression behind a chaos run's "after SIGTERM: None": a SIGTERM sent after the stop
    /// was made but before anything waited on it is not lost.
    #[tokio::test]
    async fn a_sigterm_before_anyone_waits_still_stops() {
        let stop = Stop::on_signal().expect("signal handlers");
        // SAFETY: raising a signal in our own process; the handler above is registered.
        unsafe {
            libc::raise(libc::SIGTERM);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        tokio::time::timeout(std::time::Duration::from_secs(5), stop.wait())
            .await
            .expect("the stop was raised");
    }
}
