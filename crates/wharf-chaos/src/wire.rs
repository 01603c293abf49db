//! The wire between the replicas and a provider: a TCP forwarder on loopback that the
//! network-cut fault cuts.
//!
//! Owns: forwarding, and the cut. A cut resets every open connection, both ways, and every
//! connection made while it lasts, as a firewall that rejects with a TCP reset does. Must not
//! know: what crosses it.
//!
//! Why a reset and not a black hole: a black-holed request that the sender gave up on still
//! sits in its socket buffer and reaches the provider when the cut heals, after the lane may
//! have moved on; the lane rules would then have to excuse exactly those calls, which the sinks
//! cannot tell from a late write by a live holder. A reset loses what was in flight, which the
//! adapters must classify (refused before sending: retry; lost after sending: ambiguous).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running wire.
pub struct Wire {
    /// The loopback port the replicas use instead of the provider's.
    pub port: u16,
    cut: Arc<AtomicBool>,
    /// Bumped at every cut; each connection resets itself when it changes.
    cuts: watch::Sender<u64>,
}

/// A connection ends with a reset (SO_LINGER 0), not a FIN: the peer sees `Connection reset`.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

impl Wire {
    /// Forwards a free loopback port to `upstream` (`127.0.0.1:<port>`).
    pub async fn start(upstream: String) -> anyhow::Result<Wire> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let cut = Arc::new(AtomicBool::new(false));
        let (cuts, _) = watch::channel(0u64);
        let (c, tx) = (cut.clone(), cuts.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if c.load(Ordering::SeqCst) {
                    reset(client);
                    continue;
                }
                let mut cut_seen = tx.subscribe();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        reset(client);
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut_seen.changed() => {
                            reset(client);
                            reset(server);
                        }
                    }
                });
            }
        });
        Ok(Wire { port, cut, cuts })
    }

    /// Cuts the wire for `down`: open connections are reset at once, new ones while it lasts.
    pub async fn cut(&self, down: Duration) {
        self.cut.store(true, Ordering::SeqCst);
        self.cuts.send_modify(|n| *n += 1);
        tokio::time::sleep(down).await;
        self.cut.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn forwards_then_resets_open_and_new_connections_while_cut() {
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = upstream.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = upstream.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let wire = Arc::new(Wire::start(address).await.unwrap());
        let mut open = TcpStream::connect(("127.0.0.1", wire.port)).await.unwrap();
        open.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        open.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");

        let w = wire.clone();
        let cutting = tokio::spawn(async move { w.cut(Duration::from_millis(500)).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The open connection was reset.
        let mut rest = Vec::new();
        let read = open.read_to_end(&mut rest).await;
        assert!(read.is_err() || rest.is_empty(), "{read:?}");
        // A new one is accepted and reset before a byte goes through.
        let mut during = TcpStream::connect(("127.0.0.1", wire.port)).await.unwrap();
        let _ = during.write_all(b"ping").await;
        let mut got = Vec::new();
        let answer = during.read_to_end(&mut got).await;
        assert!(answer.is_err() || got.is_empty(), "{answer:?} {got:?}");

        cutting.await.unwrap();
        let mut after = TcpStream::connect(("127.0.0.1", wire.port)).await.unwrap();
        after.write_all(b"pong").await.unwrap();
        after.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong", "the wire heals");
    }
}
