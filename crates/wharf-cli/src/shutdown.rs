//! Graceful shutdown: a future that completes on SIGINT (Ctrl-C) or SIGTERM.

/// Completes when the process is asked to stop.
pub async fn signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}

/// One stop signal, many listeners: the HTTP server and the executor stop together, whether
/// the operator asked (SIGINT/SIGTERM) or one of them failed.
#[derive(Clone)]
pub struct Stop {
    tx: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
    rx: tokio::sync::watch::Receiver<bool>,
}

impl Stop {
    /// Starts listening for SIGINT/SIGTERM.
    pub fn on_signal() -> Stop {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let stop = Stop {
            tx: std::sync::Arc::new(tx),
            rx,
        };
        let trigger = stop.clone();
        tokio::spawn(async move {
            signal().await;
            trigger.trigger();
        });
        stop
    }

    /// Stops everything that waits on this signal.
    pub fn trigger(&self) {
        let _ = self.tx.send(true);
    }

    /// Completes once the stop signal came.
    pub async fn wait(mut self) {
        let _ = self.rx.wait_for(|stopped| *stopped).await;
    }
}
