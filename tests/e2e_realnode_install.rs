//! gangplank as pods, from its own image, on a real node (issue 40 item 1, issue 39 item 1):
//! the image `.ci/image` built loaded into containerd, deploy/ and deploy/controller applied
//! with `kubectl apply -k`, the certificate from `gangplank certs`; then the webhook's three
//! replicas and the controller's two turn Ready through the kubelet's probes and run as their
//! specs promise (the runtime's own OCI spec read back), the README's verify step refuses a
//! known-bad job with `--dry-run=server`, and a job applied through the installed webhooks is
//! run by the installed controller to Succeeded.

mod support;

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use support::install::{
    self, describe, kubectl_ok, managed_namespace, scale_webhook, Install, NAMESPACE,
};
use support::realnode::{self, node, RealNode, BUSYBOX};
use support::realnode_jobs::{pytorch_rendezvous_of, tag_only_job, wait_for_job_condition};

fn main() {
    let tests: Vec<(&'static str, support::harness::Test)> = vec![
        (
            "the_webhook_and_the_controller_run_from_the_image_as_their_specs_promise",
            || Box::pin(the_webhook_and_the_controller_run_from_the_image_as_their_specs_promise()),
        ),
        (
            "the_verify_step_refuses_a_known_bad_job_with_a_server_dry_run",
            || Box::pin(the_verify_step_refuses_a_known_bad_job_with_a_server_dry_run()),
        ),
        (
            "a_job_applied_through_the_installed_webhooks_runs_to_succeeded",
            || Box::pin(a_job_applied_through_the_installed_webhooks_runs_to_succeeded()),
        ),
        ("a_gang_the_node_cannot_hold_is_refused_at_create", || {
            Box::pin(a_gang_the_node_cannot_hold_is_refused_at_create())
        }),
        (
            "a_review_flood_through_the_service_kills_no_webhook_pod",
            || Box::pin(a_review_flood_through_the_service_kills_no_webhook_pod()),
        ),
        (
            "the_webhooks_own_life_rollout_kill_all_gone_and_back_and_the_leader_killed",
            || {
                Box::pin(
                    the_webhooks_own_life_rollout_kill_all_gone_and_back_and_the_leader_killed(),
                )
            },
        ),
        (
            "after_kubectl_delete_k_nothing_of_gangplank_refuses_a_job",
            || Box::pin(after_kubectl_delete_k_nothing_of_gangplank_refuses_a_job()),
        ),
    ];
    realnode::run_suite_with(
        "e2e_realnode_install",
        realnode::DEFAULT_DOMAIN,
        install::image_requirement,
        tests,
    )
}

/// The install, done once: a failure is kept, so the other tests report it instead of
/// installing again over what the first attempt left.
static INSTALL: OnceLock<Result<Install, String>> = OnceLock::new();

fn installed() -> (&'static RealNode, &'static Install) {
    let node = node();
    let install = INSTALL.get_or_init(|| {
        let install = std::panic::catch_unwind(|| Install::run(node)).map_err(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "the install panicked".to_string())
        })?;
        eprintln!(
            "realnode: installed {} from deploy/: kubectl apply -k to both Deployments rolled \
             out in {:.1} s; the apiserver reached the webhooks {:.1} s later",
            install.image,
            install.rollout.as_secs_f64(),
            install.answering.as_secs_f64()
        );
        Ok(install)
    });
    match install {
        Ok(install) => (node, install),
        Err(why) => panic!("the install failed: {why}"),
    }
}

async fn pods(client: &kube::Client, component: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = format!("app.kubernetes.io/component={component}");
    api.list(&ListParams::default().labels(&selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn the_webhook_and_the_controller_run_from_the_image_as_their_specs_promise() {
    let (node, install) = installed();
    let client = node.client().await;
    for (component, replicas) in [("webhook", 3), ("controller", 2)] {
        let pods = pods(&client, component).await;
        assert_eq!(pods.len(), replicas, "{component}: {}", describe(node));
        for pod in &pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let spec = pod.spec.clone().unwrap_or_default();
            let status = pod.status.clone().unwrap_or_default();
            let container = status
                .container_statuses
                .unwrap_or_default()
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("{name}: no container status"));
            // Ready means the kubelet's readiness probe passed; no restart means liveness did.
            assert!(ready(pod), "{name} is not Ready: {}", describe(node));
            assert_eq!(container.restart_count, 0, "{name}: {}", describe(node));
            assert_eq!(
                container.image, install.image,
                "{name} runs the loaded image"
            );
            assert_eq!(
                spec.priority_class_name.as_deref(),
                Some("gangplank-critical")
            );
            assert_eq!(spec.priority, Some(1_000_000_000), "{name}");
            let id = container
                .container_id
                .unwrap_or_default()
                .trim_start_matches("containerd://")
                .to_string();
            // What the kubelet asked the runtime for, not what the manifest says.
            let oci = node.container_spec(&id);
            assert_eq!(oci["root"]["readonly"], true, "{name}: read-only root");
            assert_eq!(oci["process"]["user"]["uid"], 65532, "{name}");
            assert_eq!(oci["process"]["user"]["gid"], 65532, "{name}");
            assert_eq!(oci["process"]["noNewPrivileges"], true, "{name}");
            let bounding = oci["process"]["capabilities"]["bounding"].as_array();
            assert!(
                bounding.is_none_or(Vec::is_empty),
                "{name}: no capabilities: {bounding:?}"
            );
            let memory = oci["linux"]["resources"]["memory"]["limit"].as_i64();
            assert!(
                memory.is_some_and(|m| m > 0),
                "{name}: a memory limit in the cgroup"
            );
        }
        // Both halves answer through their Deployment as a whole.
        let out = node.kubectl(&[
            "-n",
            NAMESPACE,
            "get",
            "deployment",
            &format!("gangplank-{component}"),
            "-o",
            "jsonpath={.status.availableReplicas}",
        ]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), replicas.to_string());
    }
    // One controller replica holds the Lease.
    let holder = kubectl_ok(
        node,
        &[
            "-n",
            NAMESPACE,
            "get",
            "lease",
            "gangplank-controller",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    );
    assert!(holder.starts_with("gangplank-controller-"), "{holder}");
}

/// README's verify step: the known-bad example, with `--dry-run=server`, is refused by the
/// webhooks the apiserver calls through their Service, and nothing is stored.
async fn the_verify_step_refuses_a_known_bad_job_with_a_server_dry_run() {
    let (node, _) = installed();
    kubectl_ok(node, &["create", "namespace", "nlp"]);
    let example = support::repo().join("examples/rejected/two-masters.yaml");
    let out = node.kubectl(&[
        "apply",
        "--dry-run=server",
        "-f",
        example.to_str().unwrap_or_default(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the bad job was accepted");
    assert!(
        stderr.contains("admission webhook") && stderr.contains("denied the request"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Master"),
        "names the field at fault: {stderr}"
    );
    assert!(!stderr.contains("failed calling webhook"), "{stderr}");
    let stored = kubectl_ok(node, &["-n", "nlp", "get", "pytorchjobs", "-o", "name"]);
    assert!(
        stored.trim().is_empty(),
        "a dry run stores nothing: {stored}"
    );
}

/// A PyTorchJob applied with kubectl passes the installed webhooks (mutated: the gang's
/// minAvailable persisted) and the installed controller runs it: the native gang binds both
/// pods, the Worker's init container waits for the Master, the ranks exchange greetings.
async fn a_job_applied_through_the_installed_webhooks_runs_to_succeeded() {
    let (node, _) = installed();
    managed_namespace(node, "team-run");
    // The images policy refuses tags: the job names its image by digest, as users must.
    let image = node.pinned(BUSYBOX);
    let mut job = pytorch_rendezvous_of("rdv", &image, 3, true);
    job["metadata"]["namespace"] = "team-run".into();
    let created = std::time::Instant::now();
    node.apply(&job.to_string());
    let client = node.client().await;
    let api = support::jobs::pytorch_api(&client, "team-run");
    let stored = serde_json::json!(api.get("rdv").await.expect("the job is stored"));
    assert_eq!(
        stored["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"], 2,
        "the mutating webhook's default: {stored}"
    );
    wait_for_job_condition(&api, "rdv", "Succeeded", Duration::from_secs(120), || {
        let pods = node.kubectl(&["-n", "team-run", "get", "pods", "-o", "wide"]);
        let logs = node.kubectl(&[
            "-n",
            NAMESPACE,
            "logs",
            "deployment/gangplank-controller",
            "--tail=30",
        ]);
        format!(
            "{}\n{}\n{}",
            String::from_utf8_lossy(&pods.stdout),
            String::from_utf8_lossy(&logs.stdout),
            describe(node)
        )
    })
    .await;
    eprintln!(
        "realnode: rdv through the installed webhooks and controller: Succeeded {:.1} s after kubectl apply",
        created.elapsed().as_secs_f64()
    );
    let logs = kubectl_ok(node, &["-n", "team-run", "logs", "rdv-master-0"]);
    assert!(
        logs.contains("rank 0 received: hello from rank 1"),
        "{logs}"
    );
}

/// The node advertises one GPU (its status patched, as a device plugin would set it); a
/// PyTorchJob of two one-GPU pods can never be placed, and the installed webhooks, whose
/// inventory watches the node, refuse it at `kubectl apply` instead of letting it wait.
async fn a_gang_the_node_cannot_hold_is_refused_at_create() {
    let (node, _) = installed();
    let patch =
        r#"{"status":{"capacity":{"nvidia.com/gpu":"1"},"allocatable":{"nvidia.com/gpu":"1"}}}"#;
    kubectl_ok(
        node,
        &[
            "patch",
            "node",
            "realnode",
            "--subresource=status",
            "--type=merge",
            "-p",
            patch,
        ],
    );
    managed_namespace(node, "team-gpu");
    let mut job = pytorch_rendezvous_of("big", &node.pinned(BUSYBOX), 0, true);
    job["metadata"]["namespace"] = "team-gpu".into();
    for replica in ["Master", "Worker"] {
        job["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"]["containers"][0]
            ["resources"] = serde_json::json!({"limits": {"nvidia.com/gpu": 1}});
    }
    let file = node.dir.path().join("big.json");
    std::fs::write(&file, job.to_string()).expect("write job");
    // The inventory sees the patched node within its watch's delay: ask until it answers
    // with the node's GPUs, then read the refusal.
    let began = std::time::Instant::now();
    let refusal = loop {
        let out = node.kubectl(&["apply", "-f", file.to_str().unwrap_or_default()]);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if !out.status.success() && stderr.contains("nvidia.com/gpu") {
            break stderr;
        }
        if out.status.success() {
            let _ = node.kubectl(&["-n", "team-gpu", "delete", "pytorchjob", "big", "--wait"]);
        }
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "never refused: {stderr}{}",
            String::from_utf8_lossy(&out.stdout)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert!(refusal.contains("denied the request"), "{refusal}");
    eprintln!(
        "realnode: a gang of 2 GPUs on a 1-GPU node, refused at create: {}",
        refusal.trim()
    );
    let stored = kubectl_ok(
        node,
        &["-n", "team-gpu", "get", "pytorchjobs", "-o", "name"],
    );
    assert!(stored.trim().is_empty(), "{stored}");
}

/// `gangplank bench` from the host against the webhook Service (kube-proxy spreads its
/// connections over the three pods) at 16 and 64 concurrent reviews: every pod stays up
/// within its memory limit (no OOMKilled, restartCount 0).
async fn a_review_flood_through_the_service_kills_no_webhook_pod() {
    let (node, install) = installed();
    // The verdicts the bench expects come from the policies the pods serve: the shipped
    // ones with the overlay's params.yaml (the native gang).
    let policies = node.dir.path().join("policies");
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(support::repo().join("policies"))
        .arg(&policies)
        .status()
        .expect("cp");
    assert!(copied.success());
    std::fs::copy(
        install.overlay.join("params.yaml"),
        policies.join("params.yaml"),
    )
    .expect("the overlay's params.yaml");
    // Jobs whose verdicts do not hang on the cluster (the pods' inventory sees a node with no
    // GPU, the bench's own evaluation sees none): a CPU job that fits, one refused for its two
    // Masters.
    let mut fits = pytorch_rendezvous_of("fits", &node.pinned(BUSYBOX), 0, true);
    fits["metadata"]["namespace"] = "team-run".into();
    let jobs = node.dir.path().join("flood");
    std::fs::create_dir_all(&jobs).expect("mkdir");
    std::fs::write(jobs.join("fits.yaml"), fits.to_string()).expect("write");
    std::fs::copy(
        support::repo().join("examples/rejected/two-masters.yaml"),
        jobs.join("two-masters.yaml"),
    )
    .expect("copy");
    let out = std::process::Command::new(support::gangplank())
        .current_dir(support::repo())
        .args(["bench", "--addr", &install.service, "--ca"])
        .arg(&install.ca)
        .arg("--policies")
        .arg(&policies)
        .arg("--examples")
        .arg(&jobs)
        .args(["--concurrency=16,64", "--duration=10s", "--warmup=1s"])
        .output()
        .expect("gangplank bench");
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("realnode: review flood through the Service:\n{report}");
    let client = node.client().await;
    for pod in pods(&client, "webhook").await {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let status = pod
            .status
            .and_then(|s| s.container_statuses)
            .and_then(|c| c.into_iter().next())
            .unwrap_or_default();
        let last = status
            .last_state
            .and_then(|s| s.terminated)
            .map(|t| t.reason);
        assert_eq!(status.restart_count, 0, "{name}: {last:?}");
        assert!(status.ready, "{name}");
    }
}

/// Dry-run creates of a valid job, one after the other, until `stop` is set: (answered by
/// the webhooks, failed calling them, refused by a policy) and the failures' first words.
async fn stream_of_applies(
    client: kube::Client,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (usize, usize, usize, Vec<String>) {
    let api = support::jobs::pytorch_api(&client, "stream");
    let mut job = pytorch_rendezvous_of("stream", &node().pinned(BUSYBOX), 0, true);
    job["metadata"]["namespace"] = "stream".into();
    let job: kube::api::DynamicObject = serde_json::from_value(job).expect("job");
    let params = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    let (mut answered, mut failed, mut refused, mut why) = (0, 0, 0, Vec::new());
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        match api.create(&params, &job).await {
            Ok(_) => answered += 1,
            Err(e) => {
                let text = e.to_string();
                if text.contains("failed calling webhook") {
                    failed += 1;
                } else {
                    refused += 1;
                }
                if why.len() < 3 {
                    why.push(text.chars().take(200).collect());
                }
            }
        }
    }
    (answered, failed, refused, why)
}

/// What a platform meets with the webhook's own pods: a rollout restart under a stream of
/// applies (none refused, none failing), one pod SIGKILLed through the runtime (the others
/// serve), all of them gone (failurePolicy Fail: creates fail naming the webhook, as the docs
/// say) and back by themselves, and the controller's leader killed (the other replica takes
/// the Lease and runs a job). Next to last in the suite: it disturbs the install.
async fn the_webhooks_own_life_rollout_kill_all_gone_and_back_and_the_leader_killed() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let (node, _) = installed();
    let client = node.client().await;
    managed_namespace(node, "stream");

    // 1. Rollout restart under a stream of applies.
    let stop = Arc::new(AtomicBool::new(false));
    let stream = tokio::spawn(stream_of_applies(client.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let began = std::time::Instant::now();
    kubectl_ok(
        node,
        &[
            "-n",
            NAMESPACE,
            "rollout",
            "restart",
            "deployment/gangplank-webhook",
        ],
    );
    kubectl_ok(
        node,
        &[
            "-n",
            NAMESPACE,
            "rollout",
            "status",
            "deployment/gangplank-webhook",
            "--timeout=240s",
        ],
    );
    let rollout = began.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let (answered, failed, refused, why) = stream.await.expect("stream");
    eprintln!(
        "realnode: rollout restart of the webhook ({:.1} s) under {answered} dry-run applies: {failed} failed calling the webhook, {refused} refused",
        rollout.as_secs_f64()
    );
    assert!(answered > 0);
    assert_eq!((failed, refused), (0, 0), "{why:?}");

    // 2. One webhook pod SIGKILLed through the runtime: the others go on serving.
    let webhook_pods = pods(&client, "webhook").await;
    let victim = webhook_pods.first().expect("a webhook pod");
    let id = victim
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.container_id.clone())
        .unwrap_or_default();
    let id = id.trim_start_matches("containerd://");
    let stop = Arc::new(AtomicBool::new(false));
    let stream = tokio::spawn(stream_of_applies(client.clone(), stop.clone()));
    node.kill_container(id);
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, Ordering::Relaxed);
    let (answered, failed, refused, why) = stream.await.expect("stream");
    eprintln!(
        "realnode: one webhook pod SIGKILLed: {answered} dry-run applies answered in the next 5 s, {failed} failed calling the webhook ({why:?})"
    );
    assert!(answered > 0, "the other replicas serve");
    assert_eq!(refused, 0, "{why:?}");

    // 3. All webhook pods gone: creates fail naming the webhook (failurePolicy Fail), and
    //    admission comes back by itself when the pods do.
    scale_webhook(node, 0);
    let gone = std::time::Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    loop {
        let (_, failed, _, why) = {
            let stop = stop.clone();
            let probe = tokio::spawn(stream_of_applies(client.clone(), stop.clone()));
            tokio::time::sleep(Duration::from_millis(300)).await;
            stop.store(true, Ordering::Relaxed);
            probe.await.expect("probe")
        };
        if failed > 0 {
            // Either webhook: while the last pods drain (5 s shutdown delay) a request can
            // pass /mutate on one and find no pod left for /validate.
            let text = why.join(" | ");
            assert!(
                text.contains("mutate.gangplank.dev") || text.contains("validate.gangplank.dev"),
                "names the webhook: {text}"
            );
            eprintln!(
                "realnode: no webhook pod: {:.1} s after scale 0, a create fails: {}",
                gone.elapsed().as_secs_f64(),
                why.first().cloned().unwrap_or_default()
            );
            break;
        }
        assert!(
            gone.elapsed() < Duration::from_secs(60),
            "creates still pass with no webhook pod"
        );
        stop.store(false, Ordering::Relaxed);
    }
    scale_webhook(node, 3);
    let back = std::time::Instant::now();
    loop {
        let stop = Arc::new(AtomicBool::new(false));
        let probe = tokio::spawn(stream_of_applies(client.clone(), stop.clone()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::Relaxed);
        let (answered, _, _, _) = probe.await.expect("probe");
        if answered > 0 {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(120),
            "admission did not come back"
        );
    }
    eprintln!(
        "realnode: scaled back to 3: admission answered again {:.1} s later",
        back.elapsed().as_secs_f64()
    );

    // 4. The controller's leader killed: the other replica takes the Lease, jobs still run.
    let lease = |field: &str| {
        kubectl_ok(
            node,
            &[
                "-n",
                NAMESPACE,
                "get",
                "lease",
                "gangplank-controller",
                "-o",
                &format!("jsonpath={{.spec.{field}}}"),
            ],
        )
    };
    let leader = lease("holderIdentity");
    let leader_pod = pods(&client, "controller")
        .await
        .into_iter()
        .find(|p| {
            p.metadata
                .name
                .as_ref()
                .is_some_and(|n| leader.starts_with(n.as_str()))
        })
        .expect("the leader's pod");
    let id = leader_pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.container_id.clone())
        .unwrap_or_default();
    let killed = std::time::Instant::now();
    node.kill_container(id.trim_start_matches("containerd://"));
    loop {
        // Whoever takes the Lease is a new process: the other replica, or the killed pod's
        // container restarted by the kubelet (its identity is unique per process). Both wait
        // out the 15 s lease, and either may win.
        let holder = lease("holderIdentity");
        if !holder.is_empty() && holder != leader {
            let same_pod = holder.starts_with(leader_pod.metadata.name.as_deref().unwrap_or("?"));
            eprintln!(
                "realnode: controller leader SIGKILLed: {holder} ({}) took the Lease {:.1} s later (lease 15 s)",
                if same_pod { "its pod, restarted" } else { "the other replica" },
                killed.elapsed().as_secs_f64()
            );
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "nobody took the Lease: {holder}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut job = pytorch_rendezvous_of("after", &node.pinned(BUSYBOX), 0, true);
    job["metadata"]["namespace"] = "team-run".into();
    managed_namespace(node, "team-run");
    node.apply(&job.to_string());
    let api = support::jobs::pytorch_api(&client, "team-run");
    wait_for_job_condition(&api, "after", "Succeeded", Duration::from_secs(120), || {
        describe(node)
    })
    .await;
}

/// The names of gangplank's cluster-scoped objects still in the cluster.
fn cluster_scoped_leftovers(node: &RealNode) -> Vec<String> {
    let kinds = "mutatingwebhookconfigurations,validatingwebhookconfigurations,\
                 validatingadmissionpolicies,validatingadmissionpolicybindings,priorityclasses,\
                 clusterroles,clusterrolebindings";
    kubectl_ok(node, &["get", kinds, "-o", "name"])
        .lines()
        .filter(|l| l.contains("gangplank"))
        .map(str::to_string)
        .collect()
}

/// Uninstall as docs/src/install.md says, `kubectl delete -k` of the overlay (the CRDs stay:
/// deleting them deletes every job). Then nothing of gangplank is left to refuse anything:
/// no webhook configuration (failurePolicy Fail: one left behind would refuse every job, the
/// Kyverno failure), no admission policy, no namespace; a job the webhooks refused before is
/// created, updated and deleted, and a job created before the uninstall is updated and deleted
/// (no finalizer of gangplank's holds it). Last in the suite: it removes the install.
async fn after_kubectl_delete_k_nothing_of_gangplank_refuses_a_job() {
    let (node, install) = installed();
    // Whatever the tests before left, the webhooks answer before the uninstall is judged.
    install::wait_until_the_webhooks_answer(node);
    kubectl_ok(node, &["create", "namespace", "after"]);
    let refused = node.kubectl_stdin(
        &["create", "--dry-run=server", "-f", "-"],
        &tag_only_job("tagged", "after"),
    );
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("denied the request"),
        "installed, the images policy refuses a tag: {}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let mut before = pytorch_rendezvous_of("before", &node.pinned(BUSYBOX), 0, true);
    before["metadata"]["namespace"] = "after".into();
    node.apply(&before.to_string());

    let began = std::time::Instant::now();
    let overlay = install.overlay.to_str().expect("overlay path");
    kubectl_ok(
        node,
        &["delete", "-k", overlay, "--wait=true", "--timeout=180s"],
    );
    eprintln!(
        "realnode: kubectl delete -k of the install took {:.1} s",
        began.elapsed().as_secs_f64()
    );
    assert_eq!(cluster_scoped_leftovers(node), Vec::<String>::new());
    let namespace = node.kubectl(&["get", "namespace", NAMESPACE]);
    assert!(
        String::from_utf8_lossy(&namespace.stderr).contains("NotFound"),
        "{NAMESPACE} is gone: {}",
        String::from_utf8_lossy(&namespace.stdout)
    );

    let created = node.kubectl_stdin(&["create", "-f", "-"], &tag_only_job("tagged", "after"));
    assert!(
        created.status.success(),
        "create: {}",
        String::from_utf8_lossy(&created.stderr)
    );
    for job in ["tagged", "before"] {
        kubectl_ok(
            node,
            &["-n", "after", "label", "pytorchjob", job, "updated=yes"],
        );
        kubectl_ok(
            node,
            &[
                "-n",
                "after",
                "delete",
                "pytorchjob",
                job,
                "--wait=true",
                "--timeout=60s",
            ],
        );
    }
    let left = kubectl_ok(node, &["-n", "after", "get", "pytorchjobs", "-o", "name"]);
    assert!(left.trim().is_empty(), "{left}");
}
