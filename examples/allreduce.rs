//! A tiny distributed "training" program for the real-node suites (tests/e2e_realnode_jobs.rs):
//! each rank reads the environment the controller injects for its framework, finds the
//! coordinator, and the ranks all-reduce a small tensor over TCP; every rank checks the sum
//! and exits 0, or prints why not and exits 1.
//!
//! Frameworks, told apart by their variables:
//! - PyTorch, XGBoost: `MASTER_ADDR`, `MASTER_PORT`, `WORLD_SIZE`, `RANK` (rank 0 coordinates);
//! - PyTorch elastic: `PET_RDZV_ENDPOINT` (`host:port`, the coordinator), `PET_NNODES`
//!   (`min:max`; the test runs min = max), ranks assigned by the coordinator;
//! - TensorFlow: `TF_CONFIG` (chief, else worker 0, coordinates; ranks in cluster order);
//! - JAX: `COORDINATOR_ADDRESS`, `COORDINATOR_PORT`, `NUM_PROCESSES`, `PROCESS_ID`;
//! - Paddle: `PADDLE_MASTER` (`ip:port`), `PADDLE_NNODES`; the pod given `POD_IP_DUMMY`
//!   coordinates, the others get ranks from it;
//! - MPI (v2beta1): `allreduce mpi-launcher PORT` reads `/etc/mpi/hostfile` and reaches every
//!   worker by its hostfile name; `allreduce mpi-worker PORT` on the workers waits for it.
//!
//! Each rank contributes `(rank + 1) * [1, 2, 3]` where its rank is known up front (and the
//! coordinator checks the ranks are 0..world, each once), else `[1, 2, 3]`.
//!
//! Failures on purpose, for the restart tests: `ALLREDUCE_FAIL_FIRST=DIR` exits with
//! `ALLREDUCE_EXIT_CODE` (default 1) the first time this pod name runs (a marker in DIR, kept
//! across restarts by a volume), `ALLREDUCE_ALWAYS_FAIL=CODE` always exits with CODE, and
//! `ALLREDUCE_DELAY_SECS=N` waits N seconds before it starts.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const BASE: [i64; 3] = [1, 2, 3];
/// How long a rank keeps trying to reach its peer: the coordinator may start later.
const CONNECT_FOR: Duration = Duration::from_secs(120);

/// What this process is in the job.
#[derive(Debug)]
struct Role {
    framework: &'static str,
    /// The coordinator's `host:port` (for the coordinator itself, the port it listens on).
    coordinator: String,
    coordinates: bool,
    world: usize,
    /// `None`: the coordinator assigns one.
    rank: Option<usize>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn number(name: &str) -> Result<usize, String> {
    let text = env(name).ok_or(format!("{name} is not set"))?;
    text.parse().map_err(|e| format!("{name}={text:?}: {e}"))
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

fn role() -> Result<Role, String> {
    if let Some(addr) = env("MASTER_ADDR") {
        let framework = if env("WORKER_ADDRS").is_some() || env("WORKER_PORT").is_some() {
            "xgboost"
        } else {
            "pytorch"
        };
        let rank = number("RANK")?;
        return Ok(Role {
            framework,
            coordinator: format!("{addr}:{}", number("MASTER_PORT")?),
            coordinates: rank == 0,
            world: number("WORLD_SIZE")?,
            rank: Some(rank),
        });
    }
    if let Some(endpoint) = env("PET_RDZV_ENDPOINT") {
        let nodes = env("PET_NNODES").unwrap_or_default();
        let max = nodes.rsplit(':').next().unwrap_or_default();
        let world = max
            .parse()
            .map_err(|e| format!("PET_NNODES={nodes:?}: {e}"))?;
        let host = endpoint.split(':').next().unwrap_or_default();
        return Ok(Role {
            framework: "pytorch-elastic",
            coordinates: host == hostname(),
            coordinator: endpoint,
            world,
            rank: None,
        });
    }
    if let Some(config) = env("TF_CONFIG") {
        return tf_role(&config);
    }
    if let Some(addr) = env("COORDINATOR_ADDRESS") {
        let rank = number("PROCESS_ID")?;
        return Ok(Role {
            framework: "jax",
            coordinator: format!("{addr}:{}", number("COORDINATOR_PORT")?),
            coordinates: rank == 0,
            world: number("NUM_PROCESSES")?,
            rank: Some(rank),
        });
    }
    if let Some(master) = env("PADDLE_MASTER") {
        return Ok(Role {
            framework: "paddle",
            coordinates: env("POD_IP_DUMMY").is_some(),
            coordinator: master,
            world: number("PADDLE_NNODES")?,
            rank: None,
        });
    }
    Err("no framework's variables (MASTER_ADDR, PET_RDZV_ENDPOINT, TF_CONFIG, COORDINATOR_ADDRESS, PADDLE_MASTER) are set".into())
}

/// TF_CONFIG's tasks in cluster order (chief, worker, ps; evaluators take no part).
fn tf_role(text: &str) -> Result<Role, String> {
    let config: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("TF_CONFIG is not JSON: {e}"))?;
    let mut tasks = Vec::new();
    for kind in ["chief", "master", "worker", "ps"] {
        let addrs = config["cluster"][kind]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (i, a) in addrs.iter().enumerate() {
            tasks.push((
                kind.to_string(),
                i,
                a.as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    let me = (
        config["task"]["type"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        config["task"]["index"].as_u64().unwrap_or(0) as usize,
    );
    let rank = tasks
        .iter()
        .position(|(k, i, _)| (k, *i) == (&me.0, me.1))
        .ok_or(format!("task {me:?} is not in TF_CONFIG's cluster"))?;
    let coordinator = tasks
        .first()
        .map(|t| t.2.clone())
        .ok_or("an empty cluster")?;
    Ok(Role {
        framework: "tensorflow",
        coordinator,
        coordinates: rank == 0,
        world: tasks.len(),
        rank: Some(rank),
    })
}

fn contribution(rank: Option<usize>) -> [i64; 3] {
    let scale = rank.map_or(1, |r| r as i64 + 1);
    BASE.map(|b| b * scale)
}

fn expected(world: usize, ranked: bool) -> [i64; 3] {
    let w = world as i64;
    let scale = if ranked { w * (w + 1) / 2 } else { w };
    BASE.map(|b| b * scale)
}

fn line(rank: Option<usize>, values: &[i64; 3]) -> String {
    let rank = rank.map_or("-1".to_string(), |r| r.to_string());
    format!("{rank} {} {} {}\n", values[0], values[1], values[2])
}

fn parse(text: &str) -> Result<(Option<usize>, [i64; 3]), String> {
    let fields: Vec<i64> = text
        .split_whitespace()
        .map(|f| f.parse().map_err(|e| format!("{text:?}: {e}")))
        .collect::<Result<_, _>>()?;
    match fields.as_slice() {
        [rank, a, b, c] => Ok(((*rank >= 0).then_some(*rank as usize), [*a, *b, *c])),
        _ => Err(format!("{text:?}: not `rank a b c`")),
    }
}

fn read_line(stream: &TcpStream) -> Result<String, String> {
    let mut text = String::new();
    BufReader::new(stream)
        .read_line(&mut text)
        .map_err(|e| e.to_string())?;
    Ok(text)
}

fn port_of(address: &str) -> Result<u16, String> {
    let port = address.rsplit(':').next().unwrap_or_default();
    port.parse()
        .map_err(|e| format!("port of {address:?}: {e}"))
}

/// The coordinator: accept every other rank, sum, answer each with its rank and the sum.
fn coordinate(role: &Role) -> Result<[i64; 3], String> {
    let port = port_of(&role.coordinator)?;
    let listener =
        TcpListener::bind(("0.0.0.0", port)).map_err(|e| format!("listen :{port}: {e}"))?;
    let mut sum = contribution(role.rank);
    let mut peers = Vec::new();
    let mut seen = vec![role.rank.unwrap_or(0)];
    let mut next = 1;
    while peers.len() + 1 < role.world {
        let (stream, from) = listener.accept().map_err(|e| e.to_string())?;
        let (rank, values) = parse(&read_line(&stream)?)?;
        let rank = rank.unwrap_or_else(|| {
            next += 1;
            next - 1
        });
        if rank >= role.world || seen.contains(&rank) {
            return Err(format!(
                "rank {rank} from {from}: out of 0..{} or twice",
                role.world
            ));
        }
        seen.push(rank);
        sum = [sum[0] + values[0], sum[1] + values[1], sum[2] + values[2]];
        println!("rank {rank} joined from {from}");
        peers.push((stream, rank));
    }
    for (mut stream, rank) in peers {
        stream
            .write_all(line(Some(rank), &sum).as_bytes())
            .map_err(|e| e.to_string())?;
    }
    Ok(sum)
}

fn connect(address: &str) -> Result<TcpStream, String> {
    let deadline = Instant::now() + CONNECT_FOR;
    loop {
        match TcpStream::connect(address) {
            Ok(stream) => return Ok(stream),
            Err(e) if Instant::now() >= deadline => return Err(format!("connect {address}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// Any other rank: send the contribution, read back the sum (and the rank given).
fn join(role: &Role) -> Result<[i64; 3], String> {
    let mut stream = connect(&role.coordinator)?;
    stream
        .write_all(line(role.rank, &contribution(role.rank)).as_bytes())
        .map_err(|e| e.to_string())?;
    let (rank, sum) = parse(&read_line(&stream)?)?;
    println!(
        "rank {} (given {rank:?})",
        role.rank.map_or("?".into(), |r| r.to_string())
    );
    Ok(sum)
}

/// MPI: the launcher reaches every worker of the hostfile; each contributes `[1, 2, 3]`.
fn mpi_launcher(port: u16) -> Result<(), String> {
    let hostfile = std::fs::read_to_string("/etc/mpi/hostfile")
        .map_err(|e| format!("/etc/mpi/hostfile: {e}"))?;
    let hosts: Vec<String> = hostfile
        .lines()
        .filter_map(|l| l.split([' ', ':']).next())
        .filter(|h| !h.is_empty())
        .map(String::from)
        .collect();
    println!("mpi launcher: hostfile names {hosts:?}");
    let mut streams = Vec::new();
    let mut sum = [0, 0, 0];
    for host in &hosts {
        let stream = connect(&format!("{host}:{port}"))?;
        let (_, values) = parse(&read_line(&stream)?)?;
        sum = [sum[0] + values[0], sum[1] + values[1], sum[2] + values[2]];
        streams.push(stream);
    }
    for (i, mut stream) in streams.into_iter().enumerate() {
        stream
            .write_all(line(Some(i), &sum).as_bytes())
            .map_err(|e| e.to_string())?;
    }
    check(
        sum,
        expected(hosts.len(), false),
        "mpi launcher",
        hosts.len(),
    )
}

fn mpi_worker(port: u16) -> Result<(), String> {
    let listener =
        TcpListener::bind(("0.0.0.0", port)).map_err(|e| format!("listen :{port}: {e}"))?;
    let (mut stream, _) = listener.accept().map_err(|e| e.to_string())?;
    stream
        .write_all(line(None, &BASE).as_bytes())
        .map_err(|e| e.to_string())?;
    let (rank, sum) = parse(&read_line(&stream)?)?;
    println!("mpi worker {rank:?}: sum {sum:?}");
    Ok(())
}

fn check(sum: [i64; 3], want: [i64; 3], who: &str, world: usize) -> Result<(), String> {
    if sum == want {
        println!("{who}: all-reduce over {world} ranks = {sum:?}, as expected");
        Ok(())
    } else {
        Err(format!("{who}: all-reduce gave {sum:?}, expected {want:?}"))
    }
}

/// The failures a test asked for, before any work: `Some(code)` to exit with.
fn planned_failure() -> Option<u8> {
    if let Some(code) = env("ALLREDUCE_ALWAYS_FAIL") {
        println!("failing on purpose with {code}");
        return Some(code.parse().unwrap_or(1));
    }
    if let Some(dir) = env("ALLREDUCE_FAIL_FIRST") {
        let marker = std::path::Path::new(&dir).join(hostname());
        if !marker.exists() {
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(&marker, b"failed once\n");
            let code = env("ALLREDUCE_EXIT_CODE")
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            println!(
                "first run of {}: failing on purpose with {code}",
                hostname()
            );
            return Some(code);
        }
    }
    if let Some(secs) = env("ALLREDUCE_DELAY_SECS").and_then(|s| s.parse().ok()) {
        println!("waiting {secs} s before starting");
        std::thread::sleep(Duration::from_secs(secs));
    }
    None
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [mode, port] = args.as_slice() {
        let port = port.parse().map_err(|e| format!("port {port:?}: {e}"))?;
        return match mode.as_str() {
            "mpi-launcher" => mpi_launcher(port),
            "mpi-worker" => mpi_worker(port),
            other => Err(format!("unknown mode {other:?}")),
        };
    }
    let role = role()?;
    println!("{role:?}");
    let sum = if role.coordinates {
        coordinate(&role)?
    } else {
        join(&role)?
    };
    let who = format!(
        "{} rank {}",
        role.framework,
        role.rank.map_or("?".into(), |r| r.to_string())
    );
    check(
        sum,
        expected(role.world, role.rank.is_some()),
        &who,
        role.world,
    )
}

fn main() -> ExitCode {
    if let Some(code) = planned_failure() {
        return ExitCode::from(code);
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("allreduce: {why}");
            ExitCode::FAILURE
        }
    }
}
