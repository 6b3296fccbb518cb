//! The HTTPS server: routes, TLS accept loop, graceful shutdown.
//!
//! Entry points: [`Server::bind`] then [`Server::run`] with a shutdown future; [`router`]
//! for driving the routes in-process.
//!
//! Routes: `POST /mutate`, `POST /validate` (AdmissionReview v1), `GET /healthz` (the
//! process answers), `GET /readyz` (policies loaded and TLS serving; JSON detail, including a
//! refused policy edit or certificate), `GET /metrics` (Prometheus text).
//!
//! # Guarantees
//! - A body over [`Config::max_body_bytes`] is not kept past the limit (what follows is only
//!   searched for its uid, in constant memory: [`super::uid`]) and is answered with HTTP 200 and an AdmissionReview that refuses
//!   it and says by how much it is over and which flag sets the limit: the apiserver shows
//!   that message, where a bare 413 would reach the user as "failed calling webhook".
//! - At most [`Config::review_bytes_in_flight`] of reviews are judged at once (a larger one
//!   alone), so that large reviews arriving together cannot take the Pod past its memory
//!   limit; a review that finds no room within [`Config::review_budget_wait`] is answered
//!   with HTTP 200 and an AdmissionReview that refuses it (code 429) and says why.
//! - A body must arrive within [`BODY_READ_TIMEOUT`], a TLS handshake within
//!   [`HANDSHAKE_TIMEOUT`]: slow clients cannot hold connections open for free.
//! - At most [`Config::max_connections`] connections are open: at the bound a new one closes
//!   the least recently active one ([`super::connections`]), so idle connections cannot lock
//!   the apiserver out or grow memory past the Pod's limit.
//! - On shutdown readiness turns false at once; the listener keeps accepting for
//!   [`Config::shutdown_delay`] (endpoints take a moment to drop a terminating Pod, and with
//!   `failurePolicy: Fail` a refused connection is a refused admission), then closes, and
//!   connections finish their requests in flight, for at most [`SHUTDOWN_GRACE`].

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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use super::body::{self, BodyError, Oversized};
use super::connections::{Activity, Connections};
use super::handler::{self, Context};
use super::metrics::{self as m, Endpoint, Metrics};
use super::reload::{PolicyStatus, PolicyStore};
use super::review::Verdict;
use super::tls::{ServingCert, TlsStatus};
use super::uid;

/// 16 MiB: the largest AdmissionReview the apiserver can send, rounded up. The apiserver
/// takes request bodies of up to 3 MiB (`MaxRequestBodyBytes`), so a submitted object has
/// at most ~3 MiB of JSON; what it sends the webhook adds `managedFields`, which for a large
/// object (one entry per list item: 20,000 env entries) is about as large as the object
/// again: 6 MiB. An UPDATE carries `oldObject` too, up to as much (an operator may raise
/// etcd's 1.5 MiB limit): 12 MiB, plus the envelope (userInfo, options: a few KiB). The old
/// 3 MiB default refused a 1.4 MB job applied with kubectl, whose review is 4 MB
/// (last-applied-configuration and managedFields). Memory per review is measured in
/// RELIABILITY.md ("Large reviews").
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of reviews judged at once (read, not yet answered), as KiB permits. Judging a
/// review takes about 12 times its size while it runs (a 4.4 MB review without its
/// managedFields: +53 MiB; RELIABILITY.md "Large reviews"), so 8 MiB of reviews in flight is
/// ~100 MiB at most. Reviews of the usual size (1–50 KiB) never wait on it: hundreds fit at
/// once. A review larger than the budget takes all of it and is judged alone.
pub const DEFAULT_REVIEW_BYTES_IN_FLIGHT: usize = 8 * 1024 * 1024;
/// Longest a review waits for room in [`DEFAULT_REVIEW_BYTES_IN_FLIGHT`]; then it is refused
/// (429), well before the webhook's 5 s timeout.
pub const DEFAULT_REVIEW_BUDGET_WAIT: Duration = Duration::from_secs(2);
/// Webhook calls time out at 5 s (timeoutSeconds); a body slower than that is useless.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(5);
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Below the Pod's default terminationGracePeriodSeconds (30 s).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);
/// An idle connection costs about 10 KiB (RELIABILITY.md: 10,000 idle TLS connections
/// added 105 MiB of RSS), so 4,096 add about 40 MiB to the ~60 MiB of a server under load:
/// within deploy/'s memory limit. The apiserver needs a few connections per replica.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

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
}

/// State shared by the routes.
#[derive(Debug)]
pub struct Shared {
    admission: Context,
    cert: Arc<ServingCert>,
    metrics: Arc<Metrics>,
    max_body_bytes: usize,
    /// [`Config::review_bytes_in_flight`] as KiB permits.
    review_budget: Arc<tokio::sync::Semaphore>,
    /// Permits of `review_budget` in all: what the largest review takes.
    budget_kib: u32,
    review_budget_wait: Duration,
    /// True while the listener accepts connections.
    serving: AtomicBool,
}

impl Shared {
    pub fn new(
        config: &Config,
        policies: Arc<PolicyStore>,
        cert: Arc<ServingCert>,
        metrics: Arc<Metrics>,
    ) -> Arc<Shared> {
        let budget_kib = budget_kib(config.review_bytes_in_flight);
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
            review_budget: Arc::new(tokio::sync::Semaphore::new(budget_kib as usize)),
            budget_kib,
            review_budget_wait: config.review_budget_wait,
            serving: AtomicBool::new(false),
        })
    }

    /// Marks TLS as serving (the accept loop does this; in-process tests may too).
    pub fn set_serving(&self, serving: bool) {
        self.serving.store(serving, Ordering::SeqCst);
    }
}

/// The routes, without TLS: for the accept loop and for in-process tests.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(shared)
}

async fn mutate(State(s): State<Arc<Shared>>, req: Request) -> Response {
    admit(&s, Endpoint::Mutate, req).await
}

async fn validate(State(s): State<Arc<Shared>>, req: Request) -> Response {
    admit(&s, Endpoint::Validate, req).await
}

async fn admit(s: &Shared, endpoint: Endpoint, req: Request) -> Response {
    let started = std::time::Instant::now();
    let limit = s.max_body_bytes;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let read = body::read_limited(req.into_body(), limit, declared);
    let body = match tokio::time::timeout(BODY_READ_TIMEOUT, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(BodyError::TooLarge(oversized))) => {
            s.metrics.request(
                endpoint,
                "other",
                m::Decision::Invalid,
                started.elapsed().as_secs_f64(),
            );
            return too_large(endpoint, limit, &oversized);
        }
        Ok(Err(BodyError::Unreadable(e))) => {
            debug!(error = %e, "request body unreadable");
            return text(
                StatusCode::BAD_REQUEST,
                format!("cannot read request body: {e}\n"),
            );
        }
        Err(_) => {
            return text(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "request body not received within {} s\n",
                    BODY_READ_TIMEOUT.as_secs()
                ),
            )
        }
    };
    // Held until the answer is encoded: what judging the review holds is freed by then.
    let permits = kib(body.len(), s.budget_kib);
    let budget = s.review_budget.clone().acquire_many_owned(permits);
    // `timeout` polls the acquisition before its timer: with a zero wait a review that
    // finds room is still judged.
    let _budget = match tokio::time::timeout(s.review_budget_wait, budget).await {
        Ok(Ok(permit)) => permit,
        _ => {
            s.metrics.request(
                endpoint,
                "other",
                m::Decision::Failed,
                started.elapsed().as_secs_f64(),
            );
            return busy(s, endpoint, &body);
        }
    };
    let answer = handler::admit(&s.admission, endpoint, &body).await;
    let status =
        StatusCode::from_u16(answer.http_status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if answer.json {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    (status, [(header::CONTENT_TYPE, content_type)], answer.body).into_response()
}

/// The budget's permits: `bytes` in KiB, at least one; at most what tokio's semaphore holds
/// (`u32` permits are far more than memory: 4 TiB).
fn budget_kib(bytes: usize) -> u32 {
    u32::try_from(bytes / 1024).unwrap_or(u32::MAX).clamp(
        1,
        u32::try_from(tokio::sync::Semaphore::MAX_PERMITS).unwrap_or(u32::MAX),
    )
}

/// The permits a review of `len` bytes takes: its KiB, at least one, at most the budget.
fn kib(len: usize, budget_kib: u32) -> u32 {
    u32::try_from(len.div_ceil(1024))
        .unwrap_or(u32::MAX)
        .clamp(1, budget_kib)
}

/// `bytes` as people read it: `8 MiB`, `64 KiB`, `1000 bytes`.
fn size_text(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    match bytes {
        0 => "0 bytes".to_string(),
        b if b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b % KIB == 0 => format!("{} KiB", b / KIB),
        b => format!("{b} bytes"),
    }
}

/// `2 s`, `500 ms`.
fn wait_text(wait: Duration) -> String {
    match wait.subsec_millis() {
        0 => format!("{} s", wait.as_secs()),
        _ => format!("{} ms", wait.as_millis()),
    }
}

/// An AdmissionReview refusing a review that found no room among the reviews being judged
/// (large ones, together over [`Config::review_bytes_in_flight`]) within
/// [`Config::review_budget_wait`].
fn busy(s: &Shared, endpoint: Endpoint, body: &[u8]) -> Response {
    // The whole body is here: its uid is found wherever it is (for the apiserver's reviews,
    // in the first few hundred bytes, where the search ends).
    let uid = uid::uid_in(body);
    let message = format!(
        "gangplank is judging other large reviews ({} at once at most) and this one ({} bytes) found no room within {}, so it is refused; retry",
        size_text(usize::try_from(s.budget_kib).unwrap_or(usize::MAX).saturating_mul(1024)),
        body.len(),
        wait_text(s.review_budget_wait)
    );
    warn!(
        endpoint = endpoint.as_str(),
        uid = uid.as_deref().unwrap_or_default(),
        bytes = body.len(),
        decision = "failed",
        "review refused: no room among the reviews in flight"
    );
    let verdict = Verdict::refuse(429, "TooManyRequests", message);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        verdict.encode(uid.as_deref().unwrap_or_default()),
    )
        .into_response()
}

/// An AdmissionReview refusing a review over the limit, with its uid when the bytes read hold
/// it (the apiserver requires the answer's uid to be the request's; without it the apiserver
/// reports the answer as invalid, and the message is in gangplank's log only).
fn too_large(endpoint: Endpoint, limit: usize, body: &Oversized) -> Response {
    let limit_bytes = u64::try_from(limit).unwrap_or(u64::MAX);
    let over = body.bytes.saturating_sub(limit_bytes);
    let at_least = if body.whole { "" } else { "at least " };
    let uid = body.uid.as_deref();
    let mut message = format!(
        "the AdmissionReview is {at_least}{over} bytes over gangplank's limit of {limit} bytes ({at_least}{} bytes), so the request cannot be judged and is refused; the limit is the gangplank webhook's --max-body-bytes flag (GANGPLANK_MAX_BODY_BYTES)",
        body.bytes
    );
    if uid.is_none() {
        message.push_str(&format!(
            "; no request.uid in the {} bytes read, so this answer cannot name the request",
            body.read
        ));
    }
    warn!(
        endpoint = endpoint.as_str(),
        uid = uid.unwrap_or_default(),
        bytes = body.bytes,
        limit,
        decision = "invalid",
        "review over the body limit refused"
    );
    let verdict = Verdict::refuse(413, "RequestEntityTooLarge", message);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        verdict.encode(uid.unwrap_or_default()),
    )
        .into_response()
}

fn text(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}

#[derive(serde::Serialize)]
struct Readiness {
    ready: bool,
    tls: TlsReadiness,
    policies: PolicyStatus,
}

#[derive(serde::Serialize)]
struct TlsReadiness {
    serving: bool,
    #[serde(flatten)]
    status: TlsStatus,
}

/// Ready when a policy set is loaded and the listener serves TLS. A refused policy edit or
/// certificate does not make the server unready (the previous one serves, and taking every
/// replica out of the Service would stop all admissions); it shows in the detail.
async fn readyz(State(s): State<Arc<Shared>>) -> Response {
    let policies = s.admission.policies.status();
    let serving = s.serving.load(Ordering::SeqCst);
    let ready = serving && policies.loaded;
    let body = Readiness {
        ready,
        tls: TlsReadiness {
            serving,
            status: s.cert.status(),
        },
        policies,
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let json = serde_json::to_vec_pretty(&body).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], json).into_response()
}

async fn metrics(State(s): State<Arc<Shared>>) -> Response {
    let mut response = Body::from(s.metrics.render()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(m::CONTENT_TYPE),
    );
    response
}

/// A bound listener, ready to serve.
pub struct Server {
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    shared: Arc<Shared>,
    policies: Arc<PolicyStore>,
    cert: Arc<ServingCert>,
    metrics: Arc<Metrics>,
    reload_interval: Duration,
    shutdown_delay: Duration,
    connections: Arc<Connections>,
}

impl Server {
    /// Binds `config.addr` (port 0 picks a free port; see [`Server::local_addr`]).
    pub async fn bind(
        config: Config,
        policies: Arc<PolicyStore>,
        cert: Arc<ServingCert>,
        metrics: Arc<Metrics>,
    ) -> Result<Server, ServeError> {
        let tls = cert.server_config().map_err(ServeError::Tls)?;
        let listener = TcpListener::bind(config.addr)
            .await
            .map_err(|source| ServeError::Bind {
                addr: config.addr,
                source,
            })?;
        metrics.set_policies_loaded(policies.status().policies);
        let shared = Shared::new(&config, policies.clone(), cert.clone(), metrics.clone());
        Ok(Server {
            listener,
            tls,
            shared,
            policies,
            cert,
            metrics,
            reload_interval: config.reload_interval,
            shutdown_delay: config.shutdown_delay,
            connections: Connections::new(config.max_connections),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves (plus [`Config::shutdown_delay`]), then drains
    /// connections (at most [`SHUTDOWN_GRACE`]). Also runs the policy and certificate
    /// reload tasks.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), ServeError> {
        let Server {
            listener,
            tls,
            shared,
            policies,
            cert,
            metrics,
            reload_interval,
            shutdown_delay,
            connections,
        } = self;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let policy_task = tokio::spawn(super::reload::watch(
            policies,
            metrics.clone(),
            reload_interval,
            stopped(stop_rx.clone()),
        ));
        let cert_task = tokio::spawn(super::tls::watch(
            cert,
            metrics,
            reload_interval,
            stopped(stop_rx),
        ));

        let acceptor = TlsAcceptor::from(tls);
        let service = TowerToHyperService::new(router(shared.clone()));
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(BODY_READ_TIMEOUT);
        let builder = Arc::new(builder);
        let graceful = GracefulShutdown::new();
        shared.set_serving(true);
        if let Ok(addr) = listener.local_addr() {
            info!(%addr, "serving admission webhooks over HTTPS");
        }

        // Resolves `shutdown_delay` after `shutdown`, with readiness already failing.
        let stop_accepting = {
            let shared = shared.clone();
            async move {
                shutdown.await;
                shared.set_serving(false);
                if !shutdown_delay.is_zero() {
                    info!(
                        delay_ms = shutdown_delay.as_millis() as u64,
                        "shutdown requested: not ready; still serving while endpoints drop this replica"
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
            let (acceptor, service, builder) = (acceptor.clone(), service.clone(), builder.clone());
            let watcher = graceful.watcher();
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
                    let io = TokioIo::new(Activity::new(tls, state.clone()));
                    let conn = builder.serve_connection(io, service);
                    if let Err(e) = watcher.watch(conn).await {
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
            });
        }

        shared.set_serving(false);
        drop(listener);
        let _ = stop_tx.send(true);
        info!(
            connections = graceful.count(),
            "shutting down: draining connections"
        );
        if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
            .await
            .is_err()
        {
            warn!(
                grace_s = SHUTDOWN_GRACE.as_secs(),
                "connections still open after the grace period; closing them"
            );
        }
        let _ = policy_task.await;
        let _ = cert_task.await;
        Ok(())
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_takes_its_kib_of_the_budget_at_least_one_at_most_all() {
        let budget = budget_kib(DEFAULT_REVIEW_BYTES_IN_FLIGHT);
        assert_eq!(budget, 8 * 1024);
        assert_eq!(kib(0, budget), 1);
        assert_eq!(kib(1, budget), 1);
        assert_eq!(kib(11 * 1024 + 1, budget), 12);
        assert_eq!(kib(16 * 1024 * 1024, budget), budget);
    }

    #[test]
    fn a_budget_under_one_kib_is_one_permit() {
        assert_eq!(budget_kib(0), 1);
        assert_eq!(budget_kib(1023), 1);
        assert_eq!(budget_kib(64 * 1024), 64);
    }

    #[test]
    fn sizes_and_waits_read_as_written_in_flags() {
        assert_eq!(size_text(8 * 1024 * 1024), "8 MiB");
        assert_eq!(size_text(64 * 1024), "64 KiB");
        assert_eq!(size_text(1000), "1000 bytes");
        assert_eq!(wait_text(Duration::from_secs(2)), "2 s");
        assert_eq!(wait_text(Duration::from_millis(250)), "250 ms");
        assert_eq!(wait_text(Duration::ZERO), "0 s");
    }
}
