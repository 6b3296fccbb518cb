//! The HTTPS server: routes, TLS accept loop, graceful shutdown.
//!
//! Entry points: [`Server::bind`] then [`Server::run`] with a shutdown future; [`router`]
//! for driving the routes in-process.
//!
//! Routes: `POST /mutate`, `POST /validate` (AdmissionReview v1), `GET /healthz` (the
//! process answers), `GET /readyz` (policies loaded and TLS serving; JSON detail, including a
//! refused policy edit or certificate), `GET /metrics` (Prometheus text; on its own
//! plain-HTTP listener with `--metrics-addr`: [`super::scrape`]).
//!
//! # Guarantees
//! - A body over [`Config::max_body_bytes`] is not kept past the limit (what follows is only
//!   searched for its uid, in constant memory: [`super::uid`]) and is answered with HTTP 200
//!   and an AdmissionReview that refuses it and says by how much it is over and which flag
//!   sets the limit: the apiserver shows that message, where a bare 413 would reach the user
//!   as "failed calling webhook".
//! - Bytes of bodies held at once stay within [`Config::review_bytes_in_flight`] from the
//!   first byte buffered until the answer is encoded (a larger review alone takes all of it:
//!   [`super::budget`]); a review that finds no room within [`Config::review_budget_wait`] is
//!   read only for its uid and answered with HTTP 200 and an AdmissionReview that refuses it
//!   (code 429) and says why. HTTP/2 windows and streams ([`H2_CONNECTION_WINDOW`],
//!   [`H2_MAX_STREAMS`]) bound what clients may send that is not read yet. The arithmetic
//!   against deploy/'s memory limit is at [`DEFAULT_REVIEW_BYTES_IN_FLIGHT`].
//! - A body must arrive within [`BODY_READ_TIMEOUT`] (else it is refused, code 408, with its
//!   uid), a TLS handshake within [`HANDSHAKE_TIMEOUT`]: slow clients cannot hold
//!   connections open for free.
//! - At most [`Config::max_connections`] connections are open: at the bound a new one closes
//!   the least recently active one ([`super::connections`]), so idle connections cannot lock
//!   the apiserver out or grow memory past the Pod's limit.
//! - With [`Config::client_ca`], `/mutate`, `/validate` and `/metrics` answer only clients
//!   whose certificate it signed and, when it requires one, carries the required subject or
//!   SAN (403 otherwise, before the body is read); `/healthz` and `/readyz` answer anyone
//!   ([`super::client_auth`] says why).
//! - Only a client so authenticated is told what other objects of the review's namespace
//!   hold (claims' modes and classes, NetworkPolicies): anyone else gets the same verdict,
//!   worded without them ([`crate::review::Caller`]).
//! - On shutdown readiness turns false at once and clients are told to leave (HTTP/1.1
//!   answers carry `Connection: close`, HTTP/2 connections get GOAWAY: [`super::drain`]);
//!   the listener keeps accepting for [`Config::shutdown_delay`] (endpoints take a moment to
//!   drop a terminating Pod, and with `failurePolicy: Fail` a refused connection is a refused
//!   admission), then closes, and connections finish their requests in flight, for at most
//!   [`SHUTDOWN_GRACE`].

#![deny(
    clippy::unwrap_used,
    reason = "request data must never panic the server"
)]
#![deny(
    clippy::expect_used,
    reason = "request data must never panic the server"
)]

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;
use tracing::{debug, info, warn};

use super::body::{self, BodyError};
use super::budget::Budget;
use super::client_auth::{ClientCa, Peer};
use super::connections::{Activity, Connections};
use super::drain::{self, Phase, Phases};
use super::handler::{self, Context};
use super::metrics::{self as m, Endpoint, Metrics};
use super::probes::{healthz, readiness};
use super::refusal::{busy, refuse, slow, too_large, too_many_values};
use super::reload::PolicyStore;
use super::scrape;
use super::tls::ServingCert;
use crate::review::Caller;

pub use super::limits::*;

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub limits: handler::Limits,
    pub max_body_bytes: usize,
    /// How often the policy directory and certificate files are polled for changes.
    pub reload_interval: Duration,
    /// After the shutdown signal, how long to keep accepting connections while `/readyz`
    /// already fails, so that endpoints stop routing here before the listener closes.
    pub shutdown_delay: Duration,
    /// Open connections at most; at the bound a new one closes the least recently active.
    pub max_connections: usize,
    /// Bytes of reviews judged at once ([`DEFAULT_REVIEW_BYTES_IN_FLIGHT`]), counted in KiB
    /// (at least one); a review larger than this takes all of it and is judged alone.
    pub review_bytes_in_flight: usize,
    /// Longest a review waits for room in `review_bytes_in_flight` before it is refused
    /// (429) ([`DEFAULT_REVIEW_BUDGET_WAIT`]). Zero: refused at once when there is no room.
    pub review_budget_wait: Duration,
    /// Image digest pinning: resolver, cache, credentials (used when params.yaml turns
    /// `imageResolution` on).
    pub images: Arc<crate::images::Pinner>,
    /// `--client-ca`: admission routes and `/metrics` answer only clients whose certificate
    /// it signed ([`super::client_auth`]). None: no client is authenticated.
    pub client_ca: Option<Arc<ClientCa>>,
    /// `--metrics-addr`: `/metrics` is served there, over plain HTTP, and no longer on the
    /// webhook port ([`super::scrape`]).
    pub metrics_addr: Option<SocketAddr>,
}

/// State shared by the routes.
#[derive(Debug)]
pub struct Shared {
    admission: Context,
    cert: Arc<ServingCert>,
    metrics: Arc<Metrics>,
    max_body_bytes: usize,
    /// [`Config::review_bytes_in_flight`], taken as bodies arrive.
    budget: Arc<Budget>,
    /// True while the listener accepts connections and readiness holds.
    serving: AtomicBool,
    /// Where the shutdown is: answers tell clients to leave once draining ([`drain`]).
    phases: Arc<Phases>,
    /// Admission routes and `/metrics` require a verified client certificate.
    client_auth: bool,
    /// What that certificate must carry, for the log of a refusal ("any" without one).
    required_identity: String,
    /// JSON values a body may hold to be parsed ([`PARSED_VALUES_PER_JUDGED_VALUE`]).
    max_parsed_values: u64,
    /// `/metrics` is served on this other listener instead.
    metrics_addr: Option<SocketAddr>,
}

impl Shared {
    pub fn new(
        config: &Config,
        policies: Arc<PolicyStore>,
        cert: Arc<ServingCert>,
        metrics: Arc<Metrics>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            admission: Context::new(
                policies,
                metrics.clone(),
                Arc::clone(&config.images),
                config.limits,
            ),
            cert,
            metrics,
            max_body_bytes: config.max_body_bytes,
            budget: Budget::new(config.review_bytes_in_flight, config.review_budget_wait),
            serving: AtomicBool::new(false),
            phases: Arc::default(),
            client_auth: config.client_ca.is_some(),
            required_identity: config
                .client_ca
                .as_ref()
                .and_then(|ca| ca.identity())
                .map_or_else(|| "any".to_string(), ToString::to_string),
            max_parsed_values: u64::try_from(config.limits.max_values)
                .unwrap_or(u64::MAX)
                .saturating_mul(PARSED_VALUES_PER_JUDGED_VALUE),
            metrics_addr: config.metrics_addr,
        })
    }

    /// Marks TLS as serving (the accept loop does this; in-process tests may too).
    pub fn set_serving(&self, serving: bool) {
        self.serving.store(serving, Ordering::SeqCst);
    }
}

/// The routes, without TLS: for the accept loop and for in-process tests (which are no
/// verified client: with `--client-ca` they get 403 on the admission routes).
pub fn router(shared: Arc<Shared>) -> Router {
    let phases = shared.phases.clone();
    Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(shared)
        .layer(middleware::from_fn_with_state(
            phases,
            drain::close_while_draining,
        ))
}

async fn mutate(State(s): State<Arc<Shared>>, req: Request) -> Response {
    match refuse_unverified(&s, &req, "/mutate") {
        Some(refusal) => refusal,
        None => admit(&s, Endpoint::Mutate, req).await,
    }
}

async fn validate(State(s): State<Arc<Shared>>, req: Request) -> Response {
    match refuse_unverified(&s, &req, "/validate") {
        Some(refusal) => refusal,
        None => admit(&s, Endpoint::Validate, req).await,
    }
}

/// Who sent `req`: authenticated only by a certificate `--client-ca` signed (with the
/// required identity); in-process requests carry no [`Peer`] and are anonymous.
fn caller(req: &Request) -> Caller {
    match req.extensions().get::<Peer>() {
        Some(Peer::Authenticated) => Caller::Authenticated,
        _ => Caller::Anonymous,
    }
}

/// With `--client-ca`, a 403 for a connection without a verified client certificate, or
/// with one that lacks the required identity (counted, and logged: a certificate of the
/// apiserver's CA that is not the apiserver's is worth a look). Plain text, not an
/// AdmissionReview: the apiserver, the only caller meant to reach these routes, presents
/// its certificate, and the body of anyone else is not read.
fn refuse_unverified(s: &Shared, req: &Request, route: &str) -> Option<Response> {
    if !s.client_auth {
        return None;
    }
    let message = match req.extensions().get::<Peer>() {
        Some(Peer::Authenticated) => return None,
        Some(Peer::OtherIdentity(presented)) => {
            warn!(route, presented = %presented, required = %s.required_identity,
                "refused: a client certificate signed by --client-ca without the required identity");
            s.metrics.client_auth_refusal("identity");
            format!("{route} requires a client certificate signed by gangplank's --client-ca that carries the identity --client-ca-subject / --client-san name (GANGPLANK_CLIENT_CA_SUBJECT, GANGPLANK_CLIENT_SAN); this connection's carries {presented}\n")
        }
        Some(Peer::Anonymous) | None => {
            debug!(route, "refused: no verified client certificate");
            s.metrics.client_auth_refusal("no_certificate");
            format!("{route} requires a client certificate signed by gangplank's --client-ca (GANGPLANK_CLIENT_CA); this connection presented none\n")
        }
    };
    Some(text(StatusCode::FORBIDDEN, message))
}

async fn admit(s: &Shared, endpoint: Endpoint, req: Request) -> Response {
    let caller = caller(&req);
    let started = std::time::Instant::now();
    let limit = s.max_body_bytes;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // Held until the answer is encoded: the body from its first byte, and what judging it
    // holds, are freed by then.
    let mut budget = s.budget.reserve();
    let deadline = tokio::time::Instant::now() + BODY_READ_TIMEOUT;
    let read = body::read_limited(
        req.into_body(),
        limit,
        declared,
        &mut budget,
        deadline,
        s.max_parsed_values,
    );
    let (unkept, refusal) = match read.await {
        Ok(bytes) => {
            return judge(s, endpoint, &bytes, caller, &mut budget).await;
        }
        Err(BodyError::Unreadable(e)) => {
            debug!(error = %e, "request body unreadable");
            return text(
                StatusCode::BAD_REQUEST,
                format!("cannot read request body: {e}\n"),
            );
        }
        Err(BodyError::TooLarge(unkept)) => {
            let refusal = too_large(limit, &unkept);
            (unkept, refusal)
        }
        Err(BodyError::NoRoom(unkept)) => {
            let refusal = busy(&s.budget, &unkept);
            (unkept, refusal)
        }
        Err(BodyError::Slow(unkept)) => {
            let refusal = slow(&unkept);
            (unkept, refusal)
        }
        Err(BodyError::TooManyValues(unkept)) => {
            let refusal = too_many_values(s.max_parsed_values);
            (unkept, refusal)
        }
    };
    let decision = match refusal.code {
        413 => m::Decision::Invalid,
        _ => m::Decision::Failed,
    };
    s.metrics
        .request(endpoint, "other", decision, started.elapsed().as_secs_f64());
    refuse(endpoint, &unkept, refusal)
}

/// Judges a body read whole, and answers.
async fn judge(
    s: &Shared,
    endpoint: Endpoint,
    body: &[u8],
    caller: Caller,
    budget: &mut super::budget::Reservation,
) -> Response {
    let answer = handler::admit_within(&s.admission, endpoint, body, caller, budget).await;
    let status =
        StatusCode::from_u16(answer.http_status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if answer.json {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    (status, [(header::CONTENT_TYPE, content_type)], answer.body).into_response()
}

fn text(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

async fn readyz(State(s): State<Arc<Shared>>) -> Response {
    let serving = s.serving.load(Ordering::SeqCst);
    readiness(serving, s.admission.policies.status(), s.cert.status())
}

/// `/metrics` on the webhook port: to verified clients only with `--client-ca`, and not at
/// all with `--metrics-addr` (served there).
async fn metrics(State(s): State<Arc<Shared>>, req: Request) -> Response {
    if let Some(addr) = s.metrics_addr {
        return text(
            StatusCode::NOT_FOUND,
            format!("/metrics is served over plain HTTP on {addr} (--metrics-addr), not on the webhook port\n"),
        );
    }
    match refuse_unverified(&s, &req, "/metrics") {
        Some(refusal) => refusal,
        None => scrape::render(&s.metrics),
    }
}

/// A bound listener, ready to serve.
pub struct Server {
    listener: TcpListener,
    /// `--metrics-addr`'s listener, when set.
    scrape: Option<TcpListener>,
    tls: Arc<ServerConfig>,
    shared: Arc<Shared>,
    policies: Arc<PolicyStore>,
    cert: Arc<ServingCert>,
    client_ca: Option<Arc<ClientCa>>,
    metrics: Arc<Metrics>,
    reload_interval: Duration,
    shutdown_delay: Duration,
    connections: Arc<Connections>,
}

impl Server {
    /// Binds `config.addr` (port 0 picks a free port; see [`Server::local_addr`]), and
    /// `config.metrics_addr` when set.
    pub async fn bind(
        mut config: Config,
        policies: Arc<PolicyStore>,
        cert: Arc<ServingCert>,
        metrics: Arc<Metrics>,
    ) -> Result<Server, ServeError> {
        let verifier = config.client_ca.as_ref().map(ClientCa::verifier);
        let tls = cert.server_config(verifier).map_err(ServeError::Tls)?;
        let listener = TcpListener::bind(config.addr)
            .await
            .map_err(|source| ServeError::Bind {
                addr: config.addr,
                source,
            })?;
        let scrape = match config.metrics_addr {
            Some(addr) => Some(scrape::bind(addr).await.map_err(ServeError::Metrics)?),
            None => None,
        };
        // The port bound (port 0 picks one), for the webhook port's pointer to it.
        config.metrics_addr = scrape.as_ref().and_then(|l| l.local_addr().ok());
        policies.export_serving(&metrics);
        let shared = Shared::new(&config, policies.clone(), cert.clone(), metrics.clone());
        Ok(Server {
            listener,
            scrape,
            tls,
            shared,
            policies,
            cert,
            client_ca: config.client_ca,
            metrics,
            reload_interval: config.reload_interval,
            shutdown_delay: config.shutdown_delay,
            connections: Connections::new(config.max_connections),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The `--metrics-addr` listener's address, when set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.scrape.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves until `shutdown` resolves, tells clients to leave for
    /// [`Config::shutdown_delay`] ([`drain`]), closes the listener, then drains connections
    /// (at most [`SHUTDOWN_GRACE`]). Also runs the policy and certificate reload tasks and
    /// the metrics listener.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), ServeError> {
        let Server {
            listener,
            scrape,
            tls,
            shared,
            policies,
            cert,
            client_ca,
            metrics,
            reload_interval,
            shutdown_delay,
            connections,
        } = self;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let mut tasks = vec![
            tokio::spawn(super::reload::watch(
                policies,
                metrics.clone(),
                reload_interval,
                stopped(stop_rx.clone()),
            )),
            tokio::spawn(super::tls::watch(
                cert,
                metrics.clone(),
                reload_interval,
                stopped(stop_rx.clone()),
            )),
        ];
        if let Some(ca) = client_ca.clone() {
            tasks.push(tokio::spawn(super::client_auth::watch(
                ca,
                metrics.clone(),
                reload_interval,
                stopped(stop_rx.clone()),
            )));
        }
        if let Some(scrape) = scrape {
            // Scraped until the process ends: the grace of the webhooks included.
            let done = stopped(stop_rx.clone());
            tokio::spawn(scrape::run(scrape, metrics.clone(), done));
        }

        let acceptor = TlsAcceptor::from(tls);
        let routes = router(shared.clone());
        let builder = Arc::new(connection_builder());
        // Each connection holds a clone until it ends; draining waits for all to be dropped.
        let (open_tx, mut open_rx) = tokio::sync::mpsc::channel::<()>(1);
        shared.set_serving(true);
        if let Ok(addr) = listener.local_addr() {
            info!(%addr, "serving admission webhooks over HTTPS");
        }

        // Resolves `shutdown_delay` after `shutdown`, with readiness failing and clients told
        // to leave meanwhile.
        let stop_accepting = {
            let shared = shared.clone();
            async move {
                shutdown.await;
                shared.set_serving(false);
                shared.phases.set(Phase::Draining);
                if !shutdown_delay.is_zero() {
                    info!(
                        delay_ms = shutdown_delay.as_millis() as u64,
                        "shutdown requested: not ready; still serving while endpoints drop this replica, clients told to reconnect"
                    );
                    tokio::time::sleep(shutdown_delay).await;
                }
            }
        };
        tokio::pin!(stop_accepting);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(conn) => conn,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut stop_accepting => break,
            };
            let _ = stream.set_nodelay(true);
            let (slot, evicted) = connections.open();
            if evicted {
                debug!(%peer, "at the connection bound: closed the least recently active connection");
            }
            let (acceptor, routes, builder) = (acceptor.clone(), routes.clone(), builder.clone());
            let client_ca = client_ca.clone();
            let (phases, open) = (shared.phases.watch(), open_tx.clone());
            tokio::spawn(async move {
                let state = slot.state().clone();
                let serve = async {
                    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                        .await
                    {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    };
                    let session = tls.get_ref().1;
                    let h2 = session.alpn_protocol() == Some(b"h2");
                    let client = client_ca
                        .as_ref()
                        .map_or(Peer::Anonymous, |ca| ca.peer(session.peer_certificates()));
                    let service = TowerToHyperService::new(routes.map_request(
                        move |mut req: Request<Incoming>| {
                            req.extensions_mut().insert(client.clone());
                            req
                        },
                    ));
                    let io = TokioIo::new(Activity::new(tls, state.clone()));
                    let conn = builder.serve_connection(io, service);
                    tokio::pin!(conn);
                    let graceful = |conn: Pin<&mut _>| auto::Connection::graceful_shutdown(conn);
                    if let Err(e) = drain::serve(conn.as_mut(), graceful, h2, phases).await {
                        debug!(%peer, error = %e, "connection ended with an error");
                    }
                };
                tokio::select! {
                    () = serve => {}
                    () = state.evicted() => {
                        debug!(%peer, "connection closed to make room for a new one");
                    }
                }
                drop(slot);
                drop(open);
            });
        }

        shared.set_serving(false);
        shared.phases.set(Phase::Closing);
        drop(listener);
        drop(open_tx);
        info!(
            connections = connections.len(),
            "shutting down: draining connections"
        );
        if tokio::time::timeout(SHUTDOWN_GRACE, open_rx.recv())
            .await
            .is_err()
        {
            warn!(
                grace_s = SHUTDOWN_GRACE.as_secs(),
                "connections still open after the grace period; closing them"
            );
        }
        let _ = stop_tx.send(true);
        for task in tasks {
            let _ = task.await;
        }
        Ok(())
    }
}

/// HTTP/1.1 and HTTP/2 as the memory bounds need them (see the constants): small read
/// buffers, few streams, small windows, so that bodies not read yet cannot pile up.
fn connection_builder() -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(BODY_READ_TIMEOUT)
        .max_buf_size(H1_MAX_BUF);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_STREAMS)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .max_header_list_size(H2_MAX_HEADER_LIST);
    builder
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS configuration")]
    Tls(#[source] super::tls::TlsError),
    #[error("metrics listener")]
    Metrics(#[source] super::scrape::BindError),
}
