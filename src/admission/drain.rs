//! Shutting down without losing a request: clients are told to go elsewhere while the
//! listener still accepts, before any connection is closed under them.
//!
//! Entry points: [`Phases`] (the server's shutdown phase, watched by every connection),
//! [`serve`] (one accepted connection through the phases) and [`close_while_draining`] (the
//! routes' middleware that answers HTTP/1.1 with `Connection: close` once draining).
//!
//! Why: under load, SIGTERM with `--shutdown-delay 5s` answered 8,327 reviews, but 2 sent on
//! kept-alive connections at +5.00 s met a TLS EOF: the connections were closed when the
//! delay ended, as the clients wrote on them. HTTP/1.1 has no way to tell an idle client that
//! the server is about to close; the answer to its next request can (`Connection: close`),
//! and HTTP/2 has GOAWAY, after which the client opens a new connection for new requests
//! while those in flight finish. So both start when the delay starts: clients reconnect,
//! through the Service, to another replica while this one still answers.
//!
//! # Phases
//! - [`Phase::Serving`].
//! - [`Phase::Draining`] (the shutdown delay): HTTP/2 connections get GOAWAY at once; every
//!   HTTP/1.1 answer carries `Connection: close` and its connection closes after it. A
//!   connection accepted now serves its first request (HTTP/2: every stream opened before
//!   its GOAWAY) and is told the same way.
//! - [`Phase::Closing`] (the listener is closed): connections that stayed idle through the
//!   delay are closed (an HTTP/1.1 client that writes at that very moment can still meet the
//!   close: nothing can tell it before); requests in flight finish, within the grace.
//!
//! # Guarantees
//! - A request whose bytes reached the server before its connection was told is answered.
//! - An HTTP/1.1 connection accepted while draining is never closed by the server before it
//!   has answered a request (or its client sent none within the header timeout).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Version};
use axum::middleware::Next;
use axum::response::Response;
use tokio::sync::watch;
use tracing::debug;

/// Where the server is in its shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Serving,
    /// The shutdown delay: readiness fails, the listener still accepts, clients are told.
    Draining,
    /// The listener is closed: connections finish what is in flight.
    Closing,
}

/// The server's phase, for every connection and route.
#[derive(Debug)]
pub struct Phases {
    tx: watch::Sender<Phase>,
}

impl Default for Phases {
    fn default() -> Phases {
        Phases {
            tx: watch::Sender::new(Phase::Serving),
        }
    }
}

impl Phases {
    pub fn set(&self, phase: Phase) {
        self.tx.send_replace(phase);
    }

    pub fn now(&self) -> Phase {
        *self.tx.borrow()
    }

    pub fn watch(&self) -> watch::Receiver<Phase> {
        self.tx.subscribe()
    }
}

/// Drives one connection until it ends, calling `graceful` (hyper's graceful shutdown:
/// GOAWAY on HTTP/2, keep-alive off on HTTP/1.1) when the phases say its client is to be
/// told (module doc). `h2`: the client chose HTTP/2 by ALPN.
pub async fn serve<C: Future>(
    mut conn: Pin<&mut C>,
    graceful: impl FnOnce(Pin<&mut C>),
    h2: bool,
    mut phases: watch::Receiver<Phase>,
) -> C::Output {
    let accepted_in = *phases.borrow_and_update();
    let mut graceful = Some(graceful);
    loop {
        tokio::select! {
            ended = conn.as_mut() => return ended,
            changed = phases.changed(), if graceful.is_some() => {
                // A dropped sender means the server is gone: close as when closing.
                let phase = match changed {
                    Ok(()) => *phases.borrow_and_update(),
                    Err(_) => Phase::Closing,
                };
                if tell(phase, accepted_in, h2) {
                    debug!(?phase, h2, "telling the client this connection closes");
                    if let Some(graceful) = graceful.take() {
                        graceful(conn.as_mut());
                    }
                }
            }
        }
    }
}

/// Whether a connection accepted in `accepted_in` is shut down gracefully in `phase` (GOAWAY
/// on HTTP/2; on HTTP/1.1 the end of the answer in flight, or at once when idle).
fn tell(phase: Phase, accepted_in: Phase, h2: bool) -> bool {
    match phase {
        Phase::Serving => false,
        // HTTP/1.1 is told by its next answer (`close_while_draining`); GOAWAY is sent on
        // HTTP/2 connections that have completed their preface (hyper drops one that has
        // not, streams and all), so not on those accepted just now.
        Phase::Draining => h2 && accepted_in == Phase::Serving,
        // HTTP/1.1 accepted while draining closes after its one answer (or its header
        // timeout): closing it now could drop a request already on its way.
        Phase::Closing => h2 || accepted_in == Phase::Serving,
    }
}

/// Middleware: once draining, HTTP/1.x answers carry `Connection: close`, so that the client
/// sends its next request on a new connection (to another replica); hyper closes the
/// connection after such an answer. HTTP/2 has no such header: its clients get GOAWAY.
pub async fn close_while_draining(
    State(phases): State<Arc<Phases>>,
    request: Request,
    next: Next,
) -> Response {
    let http1 = request.version() <= Version::HTTP_11;
    let mut response = next.run(request).await;
    if http1 && phases.now() != Phase::Serving {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_told_when_the_delay_starts_except_where_telling_could_drop_a_request() {
        use Phase::*;
        // (phase, accepted in, h2) → told
        let cases = [
            (Serving, Serving, true, false),
            (Serving, Serving, false, false),
            (Draining, Serving, true, true),
            (Draining, Serving, false, false),
            (Draining, Draining, true, false),
            (Draining, Draining, false, false),
            (Closing, Serving, true, true),
            (Closing, Serving, false, true),
            (Closing, Draining, true, true),
            (Closing, Draining, false, false),
        ];
        for (phase, accepted_in, h2, told) in cases {
            assert_eq!(
                tell(phase, accepted_in, h2),
                told,
                "{phase:?}, accepted in {accepted_in:?}, h2 {h2}"
            );
        }
    }
}
