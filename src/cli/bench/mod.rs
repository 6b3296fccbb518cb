//! `gangplank bench`: a load generator for the HTTPS webhooks.
//!
//! Starts `gangplank serve` as a child process (its own RSS and CPU are then measurable)
//! with a generated certificate, or targets a running server with `--url`. Each of
//! `--concurrency` workers holds one keep-alive HTTP/1.1 connection over TLS and sends
//! reviews back to back: the mix is every manifest under `--examples` as a CREATE to
//! `/mutate`, and the object as mutated to `/validate` (so some are denied), as the
//! apiserver's two calls per `kubectl apply`. Every answer is checked against the offline
//! decision; a wrong or failed answer counts as an error.
//!
//! For soaks and fault runs: `--rate` paces the workers to a total rate (latency is then
//! counted from when each request was due, so a stalled server shows in the figures instead
//! of slowing the client down), `--report-every` prints figures per interval (the server's
//! RSS included) while a level runs, and `--idle-connections` holds that many idle TLS
//! connections open throughout ([`idle`]).

mod idle;
mod process;
mod server;

use process::{cpu_seconds, memory};
use server::{connect, connector, send, spawn_server, wait_ready, REFUSED};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use serde_json::{json, Value};
use tokio_rustls::TlsConnector;

use crate::duration::parse_duration;
use crate::exit;
use crate::policy::PolicySet;
use crate::review::documents::ReadOptions;
use crate::review::{self, read_documents};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Concurrency levels to run, one after the other.
    #[arg(
        long,
        default_values_t = [1, 16, 64],
        value_delimiter = ',',
        env = "GANGPLANK_BENCH_CONCURRENCY"
    )]
    pub concurrency: Vec<usize>,
    /// Measured time per level.
    #[arg(long, default_value = "10s", value_parser = parse_duration, env = "GANGPLANK_BENCH_DURATION")]
    pub duration: Duration,
    /// Unmeasured time per level before measuring (connections, caches, allocator).
    #[arg(long, default_value = "2s", value_parser = parse_duration, env = "GANGPLANK_BENCH_WARMUP")]
    pub warmup: Duration,
    /// Manifests the reviews are made of (directories are walked): by default the examples
    /// and the platform-style job (30 env entries per container, sidecars, probes, ...).
    #[arg(
        long,
        default_values = ["examples", "benches/data/pytorchjob-9-platform.yaml"],
        value_delimiter = ',',
        env = "GANGPLANK_BENCH_EXAMPLES"
    )]
    pub examples: Vec<PathBuf>,
    /// A second mix run at each level right after the first, on the same server, with the
    /// ratio of the two rates printed: `--baseline examples/configmap.yaml` (reviews skipped
    /// before evaluation) is the server's plumbing alone, read in the same machine state.
    #[arg(long, value_delimiter = ',', env = "GANGPLANK_BENCH_BASELINE")]
    pub baseline: Vec<PathBuf>,
    /// Policy directory, for the spawned server and for the expected verdicts.
    #[arg(long, default_value = "policies", env = "GANGPLANK_POLICIES")]
    pub policies: PathBuf,
    /// A running server to load instead of spawning one (needs --ca).
    #[arg(long, env = "GANGPLANK_BENCH_ADDR", requires = "ca")]
    pub addr: Option<SocketAddr>,
    /// CA that signed the running server's certificate.
    #[arg(long, env = "GANGPLANK_BENCH_CA")]
    pub ca: Option<PathBuf>,
    /// Process id of the running server, for its RSS and CPU time.
    #[arg(long, env = "GANGPLANK_BENCH_SERVER_PID")]
    pub server_pid: Option<u32>,
    /// Total reviews per second over all workers (0: each worker sends back to back).
    #[arg(long, default_value_t = 0, env = "GANGPLANK_BENCH_RATE")]
    pub rate: u32,
    /// Print figures (reviews/s, p50, p99, max, errors, server RSS) every this long while a
    /// level runs, for soaks (e.g. 1m).
    #[arg(long, value_parser = parse_duration, env = "GANGPLANK_BENCH_REPORT_EVERY")]
    pub report_every: Option<Duration>,
    /// Idle TLS connections to open before the load and hold throughout (a slowloris
    /// client): handshaken, ALPN h2 and http/1.1 alternately, sending nothing.
    #[arg(long, default_value_t = 0, env = "GANGPLANK_BENCH_IDLE_CONNECTIONS")]
    pub idle_connections: usize,
    /// Extra arguments for the spawned `gangplank serve`.
    #[arg(long, allow_hyphen_values = true, env = "GANGPLANK_BENCH_SERVE_ARGS")]
    pub serve_args: Vec<String>,
}

/// One prepared request and what its answer must say.
struct Case {
    path: &'static str,
    body: Bytes,
    allowed: bool,
}

#[derive(Clone)]
struct Target {
    addr: SocketAddr,
    /// HTTP/1.1 by ALPN: what the load speaks.
    connector: TlsConnector,
    /// HTTP/2 by ALPN: for idle connections ([`idle`]).
    h2_connector: TlsConnector,
    pid: Option<u32>,
}

/// How one level runs.
#[derive(Clone, Copy)]
struct Plan {
    concurrency: usize,
    duration: Duration,
    /// Total reviews per second; `None`: back to back.
    rate: Option<u32>,
    /// Print a line per interval while running.
    report_every: Option<Duration>,
}

/// Latencies and errors of one level.
#[derive(Default)]
struct Tally {
    micros: Vec<u32>,
    errors: u64,
    /// Of the errors, connections refused: nothing listening (a server gone or stopping),
    /// as opposed to a request sent and not answered right.
    refused: u64,
    first_error: Option<String>,
}

impl BenchArgs {
    pub fn run(self) -> u8 {
        // The load generator gets one thread: it shares the machine with the server.
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("error: cannot start the async runtime: {e}");
                return exit::UNREADABLE;
            }
        };
        match rt.block_on(self.bench()) {
            Ok(code) => code,
            Err(message) => {
                eprintln!("error: {message}");
                exit::UNREADABLE
            }
        }
    }

    async fn bench(self) -> Result<u8, String> {
        let Self {
            concurrency,
            duration,
            warmup,
            examples,
            baseline,
            policies,
            addr,
            ca,
            server_pid,
            rate,
            report_every,
            idle_connections,
            serve_args,
        } = self;
        let rate = (rate > 0).then_some(rate);
        let cases = Arc::new(prepare(&examples, &policies).await?);
        let baseline_cases = match baseline.is_empty() {
            true => None,
            false => Some(Arc::new(prepare(&baseline, &policies).await?)),
        };
        let (target, _child) = match (addr, ca) {
            (Some(addr), Some(ca)) => {
                let pem = std::fs::read(&ca).map_err(|e| format!("{}: {e}", ca.display()))?;
                let target = Target {
                    addr,
                    connector: connector(&pem, b"http/1.1")?,
                    h2_connector: connector(&pem, b"h2")?,
                    pid: server_pid,
                };
                (target, None)
            }
            _ => {
                let (target, child) = spawn_server(&policies, &serve_args)?;
                (target, Some(child))
            }
        };
        wait_ready(&target).await?;
        let idle = match idle_connections {
            0 => None,
            n => {
                let idle = idle::hold(&target, n).await;
                println!(
                    "# {} idle TLS connections held open ({} could not be opened{})",
                    idle.opened,
                    idle.failed,
                    idle.first_error
                        .as_deref()
                        .map_or(String::new(), |e| format!(": {e}"))
                );
                Some(idle)
            }
        };
        if let Some(rate) = rate {
            println!("# paced to {rate} reviews/s in total; latency counted from when each review was due");
        }
        describe(&cases, &examples, duration, warmup);
        if let Some(base) = &baseline_cases {
            print!("# baseline: ");
            describe(base, &baseline, duration, warmup);
        }
        println!("concurrency  reviews/s   p50 ms   p99 ms   max ms  errors  server RSS MiB (peak)  server CPU s/1k reviews");
        let mut failed = false;
        for &c in &concurrency {
            let plan = Plan {
                concurrency: c.max(1),
                duration,
                rate,
                report_every,
            };
            let (rate_main, ok) = level(&target, &cases, plan, warmup, &c.to_string()).await;
            failed |= !ok;
            if let Some(base) = &baseline_cases {
                let (rate_base, ok) =
                    level(&target, base, plan, warmup, &format!("{c} base")).await;
                failed |= !ok;
                println!(
                    "{:>11}  ratio to the baseline: {:.3}",
                    format!("{c} ratio"),
                    rate_main / rate_base.max(f64::MIN_POSITIVE)
                );
            }
        }
        if let Some(idle) = &idle {
            println!(
                "# idle connections: {} held, {} closed by the server",
                idle.opened,
                idle.closed_by_server()
            );
        }
        Ok(if failed { exit::FAILED } else { exit::OK })
    }
}

/// The `# N reviews from ...` line of a mix.
fn describe(cases: &[Case], from: &[PathBuf], duration: Duration, warmup: Duration) {
    let mutate = cases.iter().filter(|c| c.path == "/mutate").count();
    let denied = cases.iter().filter(|c| !c.allowed).count();
    let from: Vec<String> = from.iter().map(|p| p.display().to_string()).collect();
    println!(
        "# {} reviews from {}: {} to /mutate, {} to /validate ({} of them denied); {}s per level after {}s warm-up",
        cases.len(),
        from.join(", "),
        mutate,
        cases.len() - mutate,
        denied,
        duration.as_secs_f64(),
        warmup.as_secs_f64(),
    );
}

/// Runs one level (warm-up, then measured) and prints its row labelled `label`; returns
/// the measured reviews/s and whether every answer was right.
async fn level(
    target: &Target,
    cases: &Arc<Vec<Case>>,
    plan: Plan,
    warmup: Duration,
    label: &str,
) -> (f64, bool) {
    let warm = Plan {
        duration: warmup,
        report_every: None,
        ..plan
    };
    let _ = load(target, cases, warm).await;
    let cpu_before = target.pid.and_then(cpu_seconds);
    let started = Instant::now();
    if plan.report_every.is_some() {
        println!(
            "#   interval  reviews/s   p50 ms   p99 ms   max ms  errors  server RSS MiB (peak)"
        );
    }
    let mut tally = load(target, cases, plan).await;
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = match (cpu_before, target.pid.and_then(cpu_seconds)) {
        (Some(a), Some(b)) => format!(
            "{:.3}",
            (b - a) / (tally.micros.len().max(1) as f64) * 1000.0
        ),
        _ => "-".into(),
    };
    let rss = target
        .pid
        .and_then(memory)
        .map_or("-".into(), |(rss, peak)| format!("{rss:.1} ({peak:.1})"));
    tally.micros.sort_unstable();
    let per_second = tally.micros.len() as f64 / elapsed;
    println!(
        "{:>11}  {:>9.0}  {:>7.3}  {:>7.3}  {:>7.3}  {:>6}  {:>21}  {:>23}",
        label,
        per_second,
        tally.percentile(0.50),
        tally.percentile(0.99),
        tally.percentile(1.0),
        tally.errors,
        rss,
        cpu,
    );
    if let Some(e) = &tally.first_error {
        eprintln!(
            "first error at concurrency {label}: {e} ({} of {} errors were connections refused)",
            tally.refused, tally.errors
        );
    }
    (per_second, tally.first_error.is_none())
}

impl Tally {
    /// The `p` quantile in ms of sorted latencies (0 when there are none).
    fn percentile(&self, p: f64) -> f64 {
        let n = self.micros.len();
        if n == 0 {
            return 0.0;
        }
        let i = ((n as f64 * p).ceil() as usize).clamp(1, n) - 1;
        f64::from(self.micros.get(i).copied().unwrap_or(0)) / 1000.0
    }

    fn merge(&mut self, other: Tally) {
        self.micros.extend(other.micros);
        self.errors += other.errors;
        self.refused += other.refused;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// The current interval's answers, shared by the workers and the reporter.
type Interval = Arc<Mutex<Tally>>;

/// Prints one line per `every` from the interval tally (then emptied), with the server's
/// RSS, until the level ends.
async fn report(target_pid: Option<u32>, every: Duration, until: Instant, interval: Interval) {
    let started = Instant::now();
    let mut n = 0u32;
    while Instant::now() < until {
        n += 1;
        tokio::time::sleep_until((started + every * n).min(until).into()).await;
        let mut t = match interval.lock() {
            Ok(mut guard) => std::mem::take(&mut *guard),
            Err(_) => return,
        };
        let secs = (every * n)
            .min(until.saturating_duration_since(started))
            .as_secs_f64();
        let span = (secs - (every * (n - 1)).as_secs_f64()).max(f64::EPSILON);
        t.micros.sort_unstable();
        let rss = target_pid
            .and_then(memory)
            .map_or("-".into(), |(rss, peak)| format!("{rss:.1} ({peak:.1})"));
        println!(
            "# {:>9.0}s  {:>9.0}  {:>7.3}  {:>7.3}  {:>7.3}  {:>6}  {:>21}",
            secs,
            t.micros.len() as f64 / span,
            t.percentile(0.50),
            t.percentile(0.99),
            t.percentile(1.0),
            t.errors,
            rss,
        );
        if let Some(e) = t.first_error {
            println!(
                "#   {} of the errors were connections refused; first error: {e}",
                t.refused
            );
        }
    }
}

/// Reviews of every manifest: CREATE to /mutate, and the mutated object to /validate. With
/// `imageResolution` on in the policies, images are pinned first, as the server will (so
/// the expected verdicts are the server's, and its digest cache is what the bench loads).
async fn prepare(examples: &[PathBuf], policies: &Path) -> Result<Vec<Case>, String> {
    let set = PolicySet::load(policies)
        .map_err(|e| format!("cannot load policies: {}", super::report::error_chain(&e)))?;
    let pinner = crate::images::Pinner::default();
    let mut cases = Vec::new();
    for (i, doc) in read_documents(examples, &ReadOptions::default())
        .into_iter()
        .enumerate()
    {
        let Ok(mut doc) = doc else { continue };
        let pinning = pinner.pin(&set, &mut doc.input).await;
        let failures = crate::images::pin::failure_violations(&pinning, &doc.input);
        let mut decision =
            review::review(&set, &doc.input).map_err(|e| format!("{}: {e}", doc.source))?;
        decision.add_violations(failures);
        let object = &doc.input.object;
        cases.push(Case {
            path: "/mutate",
            body: review_body(&format!("bench-m-{i}"), object),
            allowed: true,
        });
        cases.push(Case {
            path: "/validate",
            body: review_body(&format!("bench-v-{i}"), &decision.mutated),
            allowed: decision.allowed(),
        });
    }
    if cases.is_empty() {
        let names: Vec<String> = examples.iter().map(|p| p.display().to_string()).collect();
        return Err(format!("no manifests under {}", names.join(", ")));
    }
    Ok(cases)
}

fn review_body(uid: &str, object: &Value) -> Bytes {
    let meta = |k: &str| object.pointer(&format!("/metadata/{k}")).cloned();
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": "CREATE",
            "name": meta("name"),
            "namespace": meta("namespace").unwrap_or_else(|| "default".into()),
            "userInfo": {"username": "bench", "groups": ["system:authenticated"]},
            "object": object,
            "dryRun": false,
        }
    });
    Bytes::from(serde_json::to_vec(&review).unwrap_or_default())
}

/// `plan.concurrency` connections sending reviews for `plan.duration`, back to back or
/// paced to `plan.rate`.
async fn load(target: &Target, cases: &Arc<Vec<Case>>, plan: Plan) -> Tally {
    let Plan {
        concurrency,
        duration,
        rate,
        report_every,
    } = plan;
    let started = Instant::now();
    let until = started + duration;
    // Each worker sends every `period`; workers are offset evenly within it.
    let period = rate.map(|r| Duration::from_secs_f64(concurrency as f64 / f64::from(r.max(1))));
    let interval: Option<Interval> = report_every.map(|_| Interval::default());
    let reporter = match (report_every, &interval) {
        (Some(every), Some(shared)) => Some(tokio::spawn(report(
            target.pid,
            every,
            until,
            shared.clone(),
        ))),
        _ => None,
    };
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..concurrency {
        let cases = cases.clone();
        let host = target.addr.to_string();
        let sender = connect(target).await;
        let interval = interval.clone();
        let target = target.clone();
        tasks.spawn(async move {
            let mut tally = Tally::default();
            let record = |tally: &mut Tally, outcome: Result<u32, String>| {
                let mut shared = interval.as_ref().and_then(|i| i.lock().ok());
                match outcome {
                    Ok(micros) => {
                        tally.micros.push(micros);
                        if let Some(s) = shared.as_mut() {
                            s.micros.push(micros);
                        }
                    }
                    Err(e) => {
                        let refused = u64::from(e.starts_with(REFUSED));
                        tally.errors += 1;
                        tally.refused += refused;
                        if let Some(s) = shared.as_mut() {
                            s.errors += 1;
                            s.refused += refused;
                            s.first_error.get_or_insert_with(|| e.clone());
                        }
                        tally.first_error.get_or_insert(e);
                    }
                }
            };
            let mut sender = match sender {
                Ok(s) => s,
                Err(e) => {
                    record(&mut tally, Err(e));
                    return tally;
                }
            };

            let offset = period.map(|p| p.mul_f64(worker as f64 / concurrency as f64));
            let mut i = worker;
            let mut k: u32 = 0;
            loop {
                let due = match (period, offset) {
                    (Some(p), Some(o)) => {
                        let due = started + o + p * k;
                        k = k.saturating_add(1);
                        tokio::time::sleep_until(due.into()).await;
                        due
                    }
                    _ => Instant::now(),
                };
                if due >= until {
                    break;
                }
                let Some(case) = cases.get(i % cases.len()) else {
                    break;
                };
                i += 1;
                // The server closed the connection (it may, e.g. draining on shutdown):
                // reconnect as the apiserver would; failing to is an error of this review.
                if sender.is_closed() {
                    match connect(&target).await {
                        Ok(s) => sender = s,
                        Err(e) => {
                            record(&mut tally, Err(e));
                            if period.is_none() {
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            continue;
                        }
                    }
                }
                let outcome = send(&mut sender, &host, case)
                    .await
                    .map(|()| u32::try_from(due.elapsed().as_micros()).unwrap_or(u32::MAX));
                record(&mut tally, outcome);
            }
            tally
        });
    }
    let mut total = Tally::default();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(t) => total.merge(t),
            Err(_) => total.errors += 1,
        }
    }
    if let Some(reporter) = reporter {
        let _ = reporter.await;
    }
    total
}
