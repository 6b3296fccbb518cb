//! `gangplank bench --idle-connections N`: a slowloris client. It opens `N` connections to
//! the server, completes the TLS handshake on each (ALPN `h2` and `http/1.1` alternately)
//! and then sends nothing, holding them while the load runs; the load's figures then show
//! whether other clients are still served. Each connection is watched, so the bench can say
//! how many the server closed.
//!
//! Entry point: [`hold`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rustls_pki_types::ServerName;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::Target;

/// The idle connections and what became of them.
pub struct Idle {
    /// Handshakes that completed.
    pub opened: usize,
    /// Connections that could not be opened or handshaken, and the first reason.
    pub failed: usize,
    pub first_error: Option<String>,
    /// Connections the server has closed since (it may close idle ones; it must go on
    /// serving the others).
    closed: Arc<AtomicUsize>,
    /// Dropping the set closes every connection still held.
    _tasks: JoinSet<()>,
}

impl Idle {
    pub fn closed_by_server(&self) -> usize {
        self.closed.load(Ordering::Relaxed)
    }
}

/// Opens `n` connections, handshakes them and holds them open, reading (and discarding)
/// whatever the server sends until it closes them.
pub async fn hold(target: &Target, n: usize) -> Idle {
    let closed = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    let (mut opened, mut failed, mut first_error) = (0, 0, None);
    let name = ServerName::IpAddress(target.addr.ip().into());
    for i in 0..n {
        let connector = if i % 2 == 0 {
            &target.h2_connector
        } else {
            &target.connector
        };
        let tls = match TcpStream::connect(target.addr).await {
            Ok(tcp) => connector
                .connect(name.clone(), tcp)
                .await
                .map_err(|e| format!("TLS: {e}")),
            Err(e) => Err(format!("connect: {e}")),
        };
        match tls {
            Ok(mut tls) => {
                opened += 1;
                let closed = closed.clone();
                tasks.spawn(async move {
                    let mut buf = [0u8; 512];
                    while let Ok(n) = tls.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                    }
                    closed.fetch_add(1, Ordering::Relaxed);
                });
            }
            Err(e) => {
                failed += 1;
                first_error.get_or_insert(e);
            }
        }
    }
    Idle {
        opened,
        failed,
        first_error,
        closed,
        _tasks: tasks,
    }
}
