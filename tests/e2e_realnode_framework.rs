//! A real framework's collective in a JAXJob (issue 40 item 2): jax and jaxlib from PyPI (CPU
//! backend, gloo collectives) in an image with Debian's CPython, each process calling
//! `jax.distributed.initialize` from the environment the controller injects and psum-ing a
//! small array across every process (`examples/jax_allreduce.py`), on a real node through the
//! real kubelet, the controller on the host with the native gang, to Succeeded.
//!
//! And a node that never becomes Ready (issue 40, bad input): a CNI configuration that does
//! not parse, which is what the container runtime reports and the kubelet turns into
//! Ready=False; the start gives up at its limit, says why, and leaves nothing behind.
//!
//! The wheels are pinned by URL and sha256, downloaded once into `~/.cache/gangplank-test`;
//! without PyPI and without that cache the JAX tests say so and do nothing.

mod support;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::python_image::{self, Wheel};
use support::realnode::{self, node, RealNode, DEFAULT_DOMAIN, STOP_LIMIT};
use support::realnode_jobs::{wait_for_job_condition, Scenario};

macro_rules! tests {
    ($($test:ident),* $(,)?) => {
        vec![$((stringify!($test), (|| Box::pin($test())) as support::harness::Test)),*]
    };
}

fn main() {
    // The node that never becomes Ready runs first: it resets the node that the others start.
    let tests = tests![
        a_node_that_never_becomes_ready_is_named_and_cleaned_up_within_the_limit,
        jax_two_processes_psum_over_gloo_and_succeed,
        jax_four_processes_psum_over_gloo_and_succeed,
    ];
    realnode::run_suite("e2e_realnode_framework", realnode::DEFAULT_DOMAIN, tests)
}

const IMAGE: &str = "localhost/gangplank-test/jax-cpu:0.10.2";

/// jax 0.10.2 and what it imports, for CPython 3.11 on x86_64. scipy, a declared dependency,
/// is left out: `import jax` and the collectives do not load it, and it is 120 MB unpacked.
const JAX_WHEELS: [Wheel; 5] = [
    Wheel {
        url: "https://files.pythonhosted.org/packages/89/82/5ab5211079a151b6f661529369c0c8e98ec64cabf5c0cf22a0a05af124d8/jax-0.10.2-py3-none-any.whl",
        sha256: "724d73c4678d8b06f6a6ab4db1b8a2fea8cd4f1e2c2564f99601634ec7b8d1c6",
    },
    Wheel {
        url: "https://files.pythonhosted.org/packages/e2/27/fb54e3265c0ffcb687f93e9fb761c589acebbe958c3fed1b2c74c3f0e782/jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl",
        sha256: "1faca3c5d4662cb4a6130a68105d68bb520764817e165d6eebfd6786c0d1f30f",
    },
    Wheel {
        url: "https://files.pythonhosted.org/packages/ed/ce/3e0eaaaca8e60ca12ec0ae396520d85a7ee4a132aa111e054accfa7c568d/ml_dtypes-0.7.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        sha256: "d214c910cabaf80aa1ee37b0f25131e20d7a6474182e5293a68985b0421299da",
    },
    Wheel {
        url: "https://files.pythonhosted.org/packages/02/03/74fe2a4cb3817d94d86402f2506554130a2f01414e299b5a843e5a8a957f/numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        sha256: "89cd468399cfd2504718f0ba50e410dca55a170b61a02ad92bb18c8a65186e93",
    },
    Wheel {
        url: "https://files.pythonhosted.org/packages/23/cd/066e86230ae37ed0be70aae89aabf03ca8d9f39c8aea0dec8029455b5540/opt_einsum-3.4.0-py3-none-any.whl",
        sha256: "69bb92469f86a1565195ece4ac0323943e83477171b91d24c35afe028a90d7cd",
    },
];

/// The JAX image loaded into the node, or why it cannot be (said once, by every test).
fn jax_image(node: &RealNode) -> Result<&'static str, String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    let loaded = LOADED.get_or_init(|| {
        python_image::requirement()?;
        let wheels = python_image::fetch(&JAX_WHEELS)?;
        let program = support::repo().join("examples/jax_allreduce.py");
        let began = Instant::now();
        let mkimage = node.tool_dir().join("mkimage.py");
        let tarball = python_image::build(IMAGE, &program, &wheels, &mkimage)?;
        let built = began.elapsed();
        node.try_import(&[&tarball])?;
        let size = std::fs::metadata(&tarball).map_or(0, |m| m.len());
        eprintln!(
            "realnode: {IMAGE}: {} MB tarball ({}), built or found in {:.1} s, loaded in {:.1} s",
            size / 1_000_000,
            tarball.display(),
            built.as_secs_f64(),
            (began.elapsed() - built).as_secs_f64()
        );
        Ok(())
    });
    loaded.clone().map(|()| IMAGE)
}

/// A JAXJob of `processes` Workers running the image's program.
fn jax_job(processes: u32) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {"name": "psum"},
        "spec": {
            // Pods kept to read their logs; a failed process fails the job.
            "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0},
            "jaxReplicaSpecs": {"Worker": {
                "replicas": processes,
                "restartPolicy": "Never",
                "template": {"spec": {
                    "containers": [{
                        "name": "jax",
                        "image": IMAGE,
                        "imagePullPolicy": "Never",
                    }],
                    "terminationGracePeriodSeconds": 1,
                }},
            }},
        },
    })
}

/// Runs a JAXJob of `processes` to Succeeded and checks every process printed the psum it
/// expected.
async fn jax_job_succeeds(namespace: &str, processes: u32) {
    let node = node();
    if let Err(why) = jax_image(node) {
        support::skip(&format!("no JAX image, so no JAXJob with real jax: {why}"));
        return;
    }
    let scenario = Scenario::new(node, namespace, &["--kinds=JAXJob"]);
    let mut job = jax_job(processes);
    job["metadata"]["namespace"] = json!(namespace);
    let created = Instant::now();
    node.apply(&job.to_string());
    let client = node.client().await;
    let api = kube::Api::namespaced_with(
        client.clone(),
        namespace,
        &support::jobs::resource("kubeflow.org/v1", "JAXJob"),
    );
    wait_for_job_condition(&api, "psum", "Succeeded", Duration::from_secs(150), || {
        format!("{}\n{}", scenario.diagnose(), logs(&scenario, processes))
    })
    .await;
    let took = created.elapsed();
    let pods = support::controller::pods_of(&client, namespace, "psum").await;
    assert_eq!(pods.len(), processes as usize, "{}", scenario.diagnose());
    let want: Vec<f64> = (0..4)
        .map(|i| (0..processes).map(|p| f64::from(i + p)).sum())
        .collect();
    let logs = logs(&scenario, processes);
    for process in 0..processes {
        let line = format!("process {process}/{processes}: {processes} devices, psum {want:?}");
        assert!(logs.contains(&line), "no line with `{line}` in\n{logs}");
        let ok = format!("process {process}: all-reduce as expected");
        assert!(logs.contains(&ok), "{logs}");
    }
    eprintln!(
        "realnode: JAXJob with real jax ({processes} processes, gloo): create → Succeeded in {:.1} s",
        took.as_secs_f64()
    );
}

/// Every worker's log, each under its pod's name.
fn logs(scenario: &Scenario, processes: u32) -> String {
    (0..processes)
        .map(|i| {
            let pod = format!("psum-worker-{i}");
            format!("--- {pod}\n{}", scenario.logs(&pod, "jax"))
        })
        .collect()
}

async fn jax_two_processes_psum_over_gloo_and_succeed() {
    jax_job_succeeds("rf-jax-2", 2).await;
}

async fn jax_four_processes_psum_over_gloo_and_succeed() {
    jax_job_succeeds("rf-jax-4", 4).await;
}

/// How long the broken node gets: past the point where the kubelet has registered it (about
/// 30 s on a loaded 2-CPU machine), well short of the tool's own 180 s wait for Ready.
const NEVER_READY_LIMIT: Duration = Duration::from_secs(60);

/// A CNI configuration that does not parse, first in the runtime's CNI directory: containerd
/// reports the network not ready, the kubelet registers the node with Ready=False and keeps
/// it so. The start gives up at its limit naming that, stops the node, and nothing is left.
async fn a_node_that_never_becomes_ready_is_named_and_cleaned_up_within_the_limit() {
    let began = Instant::now();
    let started = RealNode::try_start(DEFAULT_DOMAIN, NEVER_READY_LIMIT, |state| {
        let cni = state.join("etc/cni/net.d");
        std::fs::create_dir_all(&cni).map_err(|e| format!("{}: {e}", cni.display()))?;
        let broken = r#"{"cniVersion": "0.4.0", "name": "broken", "plugins": ["#;
        std::fs::write(cni.join("00-broken.conflist"), broken).map_err(|e| e.to_string())
    });
    let took = began.elapsed();
    let why = match started {
        Ok(node) => {
            node.stop();
            panic!("a node with a CNI configuration that does not parse became Ready");
        }
        Err(why) => why,
    };
    eprintln!(
        "realnode: never Ready: gave up and cleaned up in {:.1} s:\n{why}",
        took.as_secs_f64()
    );
    assert!(
        why.contains(&format!("did not finish within {NEVER_READY_LIMIT:?}")),
        "gave up at its limit: {why}"
    );
    assert!(
        why.contains("Ready condition: False") && why.contains("NetworkReady=false"),
        "names the kubelet's reason: {why}"
    );
    assert!(
        why.contains("00-broken.conflist: error parsing"),
        "names the file the runtime could not load: {why}"
    );
    // The reset before, the limit, the stop after: never more, whatever the node does.
    assert!(
        took < NEVER_READY_LIMIT + 2 * STOP_LIMIT,
        "took {took:?}, beyond its limits"
    );
    let left = realnode::leftovers();
    assert!(left.is_empty(), "left behind:\n{}", left.join("\n"));
}
