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

/// One stop signal, many listeners: the HTTP server and the executor stop together.
#[derive(Clone)]
pub struct Stop(tokio::sync::watch::Receiver<bool>);

impl Stop {
    /// Starts listening for SIGINT/SIGTERM.
    pub fn on_signal() -> Stop {
        let (tx, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            signal().await;
            let _ = tx.send(true);
        });
        Stop(rx)
    }

    /// Completes once the stop signal came.
    pub async fn wait(mut self) {
        let _ = self.0.wait_for(|stopped| *stopped).await;
    }
}
