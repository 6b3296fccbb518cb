//! Faults under load, against a real kube-apiserver of the suite's own (RELIABILITY.md, issue
//! 12): while `gangplank bench` loads `gangplank serve` (cluster inventory on, watching the
//! same apiserver) and jobs stream in, the controller is SIGKILLed mid-reconcile and replaced
//! (as its Deployment would), then the kube-apiserver is SIGKILLed and restarted. Afterwards
//! every job has exactly its pods, no pod was ever made twice, every job's status follows its
//! pods through Running to Succeeded, and the webhook answered every review.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;
use support::controller::{pods_of, set_exited, set_running, Controller};
use support::process::Process;
use support::{jobs, ControlPlane, Crds};

e2e_suite!(
    "e2e_faults",
    [the_controller_killed_and_the_apiserver_restarted_under_load_lose_nothing]
);

/// Jobs streamed in (1 Master + 2 Workers each), one every [`JOB_INTERVAL`].
const JOBS: usize = 24;
const PODS_PER_JOB: usize = 3;
const JOB_INTERVAL: Duration = Duration::from_millis(400);
/// The controller is killed once this many jobs exist, the apiserver restarted at the next.
const KILL_CONTROLLER_AT: usize = 4;
const RESTART_APISERVER_AT: usize = 10;
/// How long the apiserver stays down (plus the ~5 s it takes to start).
const APISERVER_DOWN: Duration = Duration::from_secs(2);
/// Longer than the scenario up to the last job's pods, so the restart happens under load.
const BENCH_FOR: &str = "40s";
/// Waits that span a lease expiry (15 s) and an apiserver restart.
const SETTLE: Duration = Duration::from_secs(90);

const CONTROLLER_ARGS: [&str; 4] = [
    "--kinds=PyTorchJob",
    "--leader-elect=true",
    "--gang-scheduler=",
    "--start-deadline=0s",
];

fn job_name(i: usize) -> String {
    format!("job-{i:02}")
}

async fn the_controller_killed_and_the_apiserver_restarted_under_load_lose_nothing() {
    let control_plane = ControlPlane::start(&support::assets::get(), Crds::TrainingV1);
    let client = control_plane.client().await;
    let ns = control_plane.namespace("faults").await;
    let lease = format!("--lease-namespace={ns}");
    let with_lease = |name: &str| {
        let mut args = CONTROLLER_ARGS.to_vec();
        args.push(&lease);
        Controller::start(&control_plane, name, &args)
    };
    let (server, bench) = webhook_under_load(&control_plane).await;
    let mut first = Some(with_lease("controller-first"));
    let mut second = None;

    let sampling = AtomicBool::new(true);
    let created = AtomicUsize::new(0);
    let sampler = sample_pod_uids(&client, &ns, &sampling);
    let stream = async {
        let mut refused = 0;
        for i in 0..JOBS {
            refused += create_until_stored(&client, &ns, i).await;
            created.store(i + 1, Ordering::Relaxed);
            tokio::time::sleep(JOB_INTERVAL).await;
        }
        refused
    };
    let faults = async {
        wait_created(&created, KILL_CONTROLLER_AT).await;
        // Mid-reconcile: the last job's pods are being made.
        drop(first.take());
        second = Some(with_lease("controller-second"));
        wait_created(&created, RESTART_APISERVER_AT).await;
        let started = Instant::now();
        control_plane.restart_apiserver(APISERVER_DOWN).await;
        eprintln!(
            "kube-apiserver killed, back and ready after {:?}",
            started.elapsed()
        );
    };
    let lifecycle = async {
        let all: Vec<usize> = (0..JOBS).collect();
        wait_created(&created, JOBS).await;
        wait_jobs_pods(&client, &ns, &all).await;
        set_pods(&client, &ns, &all, Exit::Running).await;
        wait_condition(&client, &ns, "Running").await;
        set_pods(&client, &ns, &all, Exit::Succeeded).await;
        wait_condition(&client, &ns, "Succeeded").await;
        sampling.store(false, Ordering::Relaxed);
    };
    let (refused, (), (), uids) = tokio::join!(stream, faults, lifecycle, sampler);
    // The outage was real: creations were refused while jobs streamed in.
    assert!(refused > 0, "no job creation met the restart");
    let second = second.expect("the replacement controller");

    // No pod made twice, none missing, none extra.
    let twice: Vec<_> = uids.iter().filter(|(_, u)| u.len() > 1).collect();
    assert!(twice.is_empty(), "pods made again: {twice:?}");
    assert_eq!(uids.len(), JOBS * PODS_PER_JOB, "{:?}", uids.keys());
    for i in 0..JOBS {
        assert_eq!(
            pods_of(&client, &ns, &job_name(i)).await.len(),
            PODS_PER_JOB
        );
    }
    // No lost status: each job went through every step, with its replicas counted.
    for job in list_jobs(&client, &ns).await {
        let name = job["metadata"]["name"].clone();
        for step in ["Created", "Running", "Succeeded"] {
            let found = job["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == step));
            assert!(found, "{name}: no {step} condition: {:#}", job["status"]);
        }
        for (rtype, count) in [("Master", 1), ("Worker", 2)] {
            // Counted once, nothing left active (zero counts are omitted).
            let counts = &job["status"]["replicaStatuses"][rtype];
            let got = (&counts["active"], &counts["succeeded"]);
            let status = &job["status"];
            assert_eq!(
                got,
                (&Value::Null, &count.into()),
                "{name} {rtype}: {status:#}"
            );
        }
    }
    let log = second.log();
    assert!(second_took_over(&log), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    eprintln!("job creations refused while the apiserver was down: {refused}");
    check_bench(server, bench);
}

/// `gangplank serve` with the cluster inventory on (KUBECONFIG: the apiserver that will be
/// restarted), and `gangplank bench` loading it at a fixed rate for [`BENCH_FOR`].
async fn webhook_under_load(control_plane: &ControlPlane) -> (Process, Process) {
    let [port] = support::control_plane::free_ports();
    let ca = control_plane.file("serve-ca.crt");
    let policies = support::repo().join("policies");
    control_plane.create_platform_priority_class();
    let args = vec![
        "serve".to_string(),
        format!("--addr=127.0.0.1:{port}"),
        format!("--policies={}", policies.display()),
        format!("--ephemeral-ca={}", ca.display()),
    ];
    let kubeconfig = control_plane.kubeconfig.display().to_string();
    let env = [("KUBECONFIG", kubeconfig.as_str())];
    let dir = control_plane.dir.path();
    let server = Process::spawn_with_env("serve", support::gangplank(), &args, &env, dir);
    support::wait_for("the serving CA", Duration::from_secs(30), || async {
        ca.exists().then_some(()).ok_or_else(|| "not yet".into())
    })
    .await;
    let pid = server.server_pid().map_or(String::new(), |p| p.to_string());
    let mut args: Vec<String> = [
        "bench",
        "--concurrency=4",
        "--rate=200",
        "--warmup=0s",
        "--report-every=5s",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.push(format!("--duration={BENCH_FOR}"));
    args.push(format!("--addr=127.0.0.1:{port}"));
    args.push(format!("--ca={}", ca.display()));
    args.push(format!("--server-pid={pid}"));
    args.push(format!("--policies={}", policies.display()));
    let examples = [
        support::repo().join("examples"),
        support::repo().join("benches/data/pytorchjob-9-platform.yaml"),
    ];
    for e in examples {
        args.push(format!("--examples={}", e.display()));
    }
    let bench = Process::spawn("bench", support::gangplank(), &args, dir);
    (server, bench)
}

/// Waits for the bench to end: it exits 0 only when every review got the expected answer.
fn check_bench(mut server: Process, mut bench: Process) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while bench.check_running().is_ok() {
        assert!(Instant::now() < deadline, "bench still running");
        std::thread::sleep(Duration::from_millis(200));
    }
    let output = bench.log_text();
    eprintln!("{output}");
    assert!(bench.exit_success(), "bench failed:\n{output}");
    let totals = output
        .lines()
        .find(|l| l.trim_start().starts_with("4 "))
        .unwrap_or_else(|| panic!("no figures in:\n{output}"));
    let errors = totals.split_whitespace().nth(5);
    assert_eq!(errors, Some("0"), "{output}");
    assert!(server.check_running().is_ok(), "{}", server.tail(40));
}

async fn wait_created(created: &AtomicUsize, at_least: usize) {
    while created.load(Ordering::Relaxed) < at_least {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates job `i`, retrying while the apiserver is away; how many attempts were refused.
async fn create_until_stored(client: &kube::Client, ns: &str, i: usize) -> usize {
    let job = jobs::pytorch_job(&job_name(i), 1);
    let deadline = Instant::now() + SETTLE;
    let mut refused = 0;
    loop {
        match jobs::create(client, ns, &job, false).await {
            Ok(_) => return refused,
            // A create that reached etcd before the connection broke.
            Err(kube::Error::Api(s)) if s.code == 409 => return refused,
            Err(e) => {
                assert!(Instant::now() < deadline, "cannot create {i}: {e}");
                refused += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
}

/// Lists the namespace's pods every 250 ms while `running`: each pod name with every UID it
/// was seen with (one, unless a pod was deleted and made again). List errors during the
/// outage are skipped.
async fn sample_pod_uids(
    client: &kube::Client,
    ns: &str,
    running: &AtomicBool,
) -> BTreeMap<String, BTreeSet<String>> {
    let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), ns);
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    while running.load(Ordering::Relaxed) {
        if let Ok(list) = api.list(&ListParams::default()).await {
            for pod in list.items {
                let name = pod.metadata.name.unwrap_or_default();
                let uid = pod.metadata.uid.unwrap_or_default();
                seen.entry(name).or_default().insert(uid);
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    seen
}

async fn wait_jobs_pods(client: &kube::Client, ns: &str, jobs: &[usize]) {
    support::wait_for("every job's pods", SETTLE, || async {
        for &i in jobs {
            let count = pods_of(client, ns, &job_name(i)).await.len();
            if count != PODS_PER_JOB {
                return Err(format!("{}: {count} pods", job_name(i)));
            }
        }
        Ok(())
    })
    .await;
}

#[derive(Clone, Copy)]
enum Exit {
    Running,
    Succeeded,
}

/// Plays the kubelet for every pod of `jobs`.
async fn set_pods(client: &kube::Client, ns: &str, jobs: &[usize], to: Exit) {
    for &i in jobs {
        for pod in pods_of(client, ns, &job_name(i)).await {
            let name = pod.metadata.name.unwrap_or_default();
            match to {
                Exit::Running => set_running(client, ns, &name, "pytorch").await,
                Exit::Succeeded => set_exited(client, ns, &name, "pytorch", 0).await,
            }
        }
    }
}

/// Waits until every job has a True `type_` condition.
async fn wait_condition(client: &kube::Client, ns: &str, type_: &str) {
    let what = format!("every job {type_}");
    support::wait_for(&what, SETTLE, || async {
        let jobs = list_jobs(client, ns).await;
        let missing: Vec<_> = jobs
            .iter()
            .filter(|j| jobs::true_condition(j, type_).is_none())
            .map(|j| j["metadata"]["name"].clone())
            .collect();
        match (jobs.len(), missing.is_empty()) {
            (JOBS, true) => Ok(()),
            _ => Err(format!("{} jobs, not yet {type_}: {missing:?}", jobs.len())),
        }
    })
    .await;
}

async fn list_jobs(client: &kube::Client, ns: &str) -> Vec<Value> {
    let api: Api<DynamicObject> = jobs::pytorch_api(client, ns);
    let list = api.list(&ListParams::default()).await;
    let items = list.map(|l| l.items).unwrap_or_default();
    items
        .into_iter()
        .map(|j| serde_json::to_value(j).expect("JSON"))
        .collect()
}

/// The replacement waited for the killed one's Lease to expire, then led.
fn second_took_over(log: &str) -> bool {
    log.contains("\"leading\"")
}
