//! Training jobs on the real node: the controller on the host (scoped to one namespace, so
//! each test runs its own with its own flags), the job's pods run by the kubelet from the
//! busybox image every realnode has, and what the kubelet reports read back.
//!
//! Entry points: [`Scenario::new`] (namespace, CRDs, controller), [`pytorch_rendezvous`] (a
//! Master and a Worker that exchange one message over MASTER_ADDR:MASTER_PORT, the Master's
//! name held back by an init container so that the Worker's init really waits),
//! [`wait_for_condition`], [`init_status`].

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, DynamicObject};
use serde_json::{json, Value};

use super::process::Process;
use super::realnode::{RealNode, BUSYBOX};

/// A namespace with the training CRDs installed and a `gangplank controller` serving it.
pub struct Scenario<'a> {
    pub node: &'a RealNode,
    pub namespace: String,
    pub controller: Process,
    /// The controller's command line, to start it again.
    args: Vec<String>,
}

impl<'a> Scenario<'a> {
    /// Creates `namespace` and starts a controller for it with `extra` flags after ours.
    pub fn new(node: &'a RealNode, namespace: &str, extra: &[&str]) -> Scenario<'a> {
        Scenario::with_init_image(node, namespace, BUSYBOX, extra)
    }

    /// As [`Scenario::new`], with `init_image` as `--pytorch-init-image`.
    pub fn with_init_image(
        node: &'a RealNode,
        namespace: &str,
        init_image: &str,
        extra: &[&str],
    ) -> Scenario<'a> {
        install_crds(node);
        node.apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}}}\n"
        ));
        let namespaces = format!("--namespaces={namespace}");
        let init_image = format!("--pytorch-init-image={init_image}");
        let mut args = vec![
            "controller",
            "--log-format=json",
            "--leader-elect=false",
            // The native gang: both pods are bound together or not at all.
            "--gang-scheduler=kubernetes",
            "--kinds=PyTorchJob",
            namespaces.as_str(),
            init_image.as_str(),
        ];
        args.extend_from_slice(extra);
        let controller = node.spawn(&format!("controller-{namespace}"), &args);
        Scenario {
            node,
            namespace: namespace.to_string(),
            controller,
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// Stops the controller (as a crash or an upgrade would); [`Scenario::start_controller`]
    /// brings it back with the same flags.
    pub fn stop_controller(&mut self) {
        self.controller.stop();
    }

    pub fn start_controller(&mut self) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let name = format!("controller-{}-again", self.namespace);
        self.controller = self.node.spawn(&name, &args);
    }

    pub fn pytorch_jobs(&self, client: &kube::Client) -> Api<DynamicObject> {
        super::jobs::pytorch_api(client, &self.namespace)
    }

    pub async fn pod(&self, client: &kube::Client, name: &str) -> Pod {
        let api: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
        api.get(name)
            .await
            .unwrap_or_else(|e| panic!("pod {name}: {e}"))
    }

    /// `kubectl logs <pod> -c <container>`.
    pub fn logs(&self, pod: &str, container: &str) -> String {
        let out = self
            .node
            .kubectl(&["logs", "-n", &self.namespace, pod, "-c", container]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// What a failed test shows: the controller's log and the pods as the kubelet sees them.
    pub fn diagnose(&self) -> String {
        let pods = self
            .node
            .kubectl(&["get", "pods", "-n", &self.namespace, "-o", "wide"]);
        format!(
            "pods:\n{}\ncontroller log (end):\n{}",
            String::from_utf8_lossy(&pods.stdout),
            self.controller.tail(30)
        )
    }
}

/// The training CRDs of `crds/`, applied server-side (their schemas are too large for the
/// last-applied annotation); idempotent.
pub fn install_crds(node: &RealNode) {
    let dir = super::repo().join("crds");
    let out = node.kubectl(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        dir.to_str().unwrap_or("crds"),
    ]);
    assert!(
        out.status.success(),
        "install crds/: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `kubectl wait` fails at once, rather than waiting, while a just-created CRD's
    // status.conditions is still null ("accessor error: <nil>"): ask again until it is set.
    let began = std::time::Instant::now();
    loop {
        let out = node.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=20s",
            "crd/pytorchjobs.kubeflow.org",
        ]);
        if out.status.success() {
            return;
        }
        assert!(
            began.elapsed() < std::time::Duration::from_secs(60),
            "crd established: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// The Master's script: listen on MASTER_PORT, expect rank 1's greeting, answer, exit 0.
const MASTER: &str = r#"echo "rank=$RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT"
got=$(echo "hello from rank 0" | nc -l -p "$MASTER_PORT" -w 120)
echo "rank 0 received: $got"
[ "$got" = "hello from rank 1" ]"#;

/// The Worker's script: connect to MASTER_ADDR:MASTER_PORT (by the short name, through the
/// search list, as a framework's getaddrinfo does), retrying while the Master is not
/// listening yet; exit 0 once the greetings are exchanged.
const WORKER: &str = r#"echo "rank=$RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT"
got=""
for i in $(seq 1 60); do
  got=$(echo "hello from rank 1" | nc -w 3 "$MASTER_ADDR" "$MASTER_PORT" 2>/dev/null) && [ -n "$got" ] && break
  sleep 1
done
echo "rank 1 received: $got (after $i tries)"
[ "$got" = "hello from rank 0" ]"#;

/// A PyTorchJob `name` of one Master and one Worker that rendezvous over TCP. The Master's
/// pod is held `master_delay_s` in an init container, so its name (a headless Service of a
/// not-ready pod has no address) appears only then; `master_ready` false gives the Master a
/// readiness probe that never passes, so its name never appears.
pub fn pytorch_rendezvous(name: &str, master_delay_s: u32, master_ready: bool) -> Value {
    pytorch_rendezvous_of(name, BUSYBOX, master_delay_s, master_ready)
}

/// As [`pytorch_rendezvous`], its containers from `image` (pinned by digest where the
/// webhooks' `images` policy judges it).
pub fn pytorch_rendezvous_of(
    name: &str,
    image: &str,
    master_delay_s: u32,
    master_ready: bool,
) -> Value {
    let container = |script: &str| {
        json!({
            "name": "pytorch",
            "image": image,
            "imagePullPolicy": "Never",
            "command": ["sh", "-c", script],
            "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
        })
    };
    let mut master = container(MASTER);
    if !master_ready {
        master["readinessProbe"] = json!({"exec": {"command": ["false"]}, "periodSeconds": 1});
    }
    let hold = json!([{
        "name": "hold",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["sleep", master_delay_s.to_string()],
    }]);
    json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {
                    "initContainers": hold,
                    "containers": [master],
                    "terminationGracePeriodSeconds": 1,
                }}},
                "Worker": {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {
                    "containers": [container(WORKER)],
                    "terminationGracePeriodSeconds": 1,
                }}},
            },
        },
    })
}

/// Waits for the job's condition `kind` to be True; panics with `diagnose` after `limit`.
pub async fn wait_for_condition(
    scenario: &Scenario<'_>,
    client: &kube::Client,
    job: &str,
    kind: &str,
    limit: Duration,
) -> Value {
    let api = scenario.pytorch_jobs(client);
    wait_for_job_condition(&api, job, kind, limit, || scenario.diagnose()).await
}

/// Waits until job `name` of `api` has condition `kind` True; its condition. Panics after
/// `limit` with the job's status and `diagnose()`.
pub async fn wait_for_job_condition(
    api: &Api<DynamicObject>,
    job: &str,
    kind: &str,
    limit: Duration,
    diagnose: impl Fn() -> String,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let object = api.get(job).await.map(|o| json!(o)).unwrap_or_default();
        let conditions = object["status"]["conditions"].as_array().cloned();
        let found = conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c["type"] == kind && c["status"] == "True");
        if let Some(condition) = found {
            return condition;
        }
        if Instant::now() >= deadline {
            panic!(
                "job {job} not {kind} after {limit:?}; status: {}\n{}",
                object["status"],
                diagnose()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The status of init container `name` of `pod`.
pub fn init_status(pod: &Pod, name: &str) -> ContainerStatus {
    pod.status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_ref())
        .and_then(|all| all.iter().find(|c| c.name == name))
        .cloned()
        .unwrap_or_else(|| panic!("no init container {name} in {:?}", pod.metadata.name))
}

/// When the pod's Ready condition last turned True (its name is served from then on), in
/// milliseconds since the epoch (the API gives whole seconds).
pub fn ready_since_ms(pod: &Pod) -> Option<i64> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|all| {
            all.iter()
                .find(|c| c.type_ == "Ready" && c.status == "True")
        })
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0.as_millisecond())
}

/// A PyTorchJob whose Master's name appears 6 s after its pod starts: the Worker's
/// init-pytorch (from `init_image`) waits for `<job>-master-0.<ns>.svc.<node's domain>.`,
/// finishes once it resolves, and the two ranks exchange their greetings; the job reaches
/// Succeeded. Prints how long after the Master's container started the Worker's init ended
/// (the figure of issue 43).
pub async fn rendezvous_succeeds(node: &RealNode, namespace: &str, init_image: &str) {
    let domain = format!("--cluster-domain={}", node.domain);
    let scenario = Scenario::with_init_image(node, namespace, init_image, &[domain.as_str()]);
    let client = node.client().await;
    let job = pytorch_rendezvous("rdv", 6, true);
    let created = Instant::now();
    scenario
        .pytorch_jobs(&client)
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(job).expect("job"),
        )
        .await
        .expect("create the job");
    wait_for_condition(
        &scenario,
        &client,
        "rdv",
        "Succeeded",
        Duration::from_secs(120),
    )
    .await;
    let succeeded_after = created.elapsed();

    let name = format!("rdv-master-0.{namespace}.svc.{}.", node.domain);
    let log = scenario.logs("rdv-worker-0", "init-pytorch");
    assert!(
        log.contains(&format!(
            "waiting for the master: {name} does not resolve yet"
        )),
        "the Worker's init waited for the Master's complete name: {log}"
    );
    assert!(
        log.contains(&format!("the master resolves: {name}")),
        "{log}"
    );
    let master_log = scenario.logs("rdv-master-0", "pytorch");
    assert!(
        master_log.contains("rank 0 received: hello from rank 1"),
        "{master_log}"
    );
    let worker_log = scenario.logs("rdv-worker-0", "pytorch");
    assert!(
        worker_log.contains("rank 1 received: hello from rank 0"),
        "{worker_log}"
    );

    let master = scenario.pod(&client, "rdv-master-0").await;
    let worker = scenario.pod(&client, "rdv-worker-0").await;
    let init = init_status(&worker, "init-pytorch");
    let finished = init
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .map(|t| {
            (
                t.exit_code,
                t.finished_at.as_ref().map(|f| f.0.as_millisecond()),
            )
        });
    assert_eq!(finished.map(|f| f.0), Some(0), "{init:?}");
    // The Master's pod turns Ready when its container starts (no probe), and the DNS
    // stand-in serves its name within a second of that.
    let master_started = started_ms(&master, "pytorch");
    let lag = finished
        .and_then(|f| f.1)
        .zip(master_started)
        .map(|(end, ready)| (end - ready) as f64 / 1000.0);
    let waits = log.matches("does not resolve yet").count();
    eprintln!(
        "realnode: rdv ({}, {init_image}): Succeeded {:.1} s after create; init-pytorch looked {waits} times \
         and ended {} s after the Master's container started (API times in whole seconds; the \
         DNS stand-in polls every second)",
        node.domain,
        succeeded_after.as_secs_f64(),
        lag.map_or("?".to_string(), |l| format!("{l:.0}")),
    );
}

/// When container `name` of `pod` started (running now or since ended), in milliseconds.
pub fn started_ms(pod: &Pod, name: &str) -> Option<i64> {
    let status = pod
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)?;
    let state = status.state.as_ref()?;
    let at = match (&state.running, &state.terminated) {
        (Some(running), _) => running.started_at.as_ref(),
        (None, Some(terminated)) => terminated.started_at.as_ref(),
        _ => None,
    }?;
    Some(at.0.as_millisecond())
}

/// busybox 1.37 (alpine 3.24's, the default init image's version) from Debian 13's
/// busybox-static, pinned by its SHA-256 in the archive's index; a newer build on the mirror
/// means this pin needs its new Filename and SHA256 (from dists/trixie/main/binary-amd64/Packages).
const BUSYBOX_137_DEB: &str = "pool/main/b/busybox/busybox-static_1.37.0-6+b9_amd64.deb";
const BUSYBOX_137_SHA256: &str = "598a3fd92bdafc34cd81196b2952ad36e910e47a4ecf162f8ce5e8e262598e53";
pub const BUSYBOX_137: &str = "localhost/gangplank-test/busybox:1.37";

/// Loads [`BUSYBOX_137`] into the node: the .deb downloaded from deb.debian.org once (kept in
/// `~/.cache/gangplank-test`), checked, unpacked with its applets linked, and packed with the
/// realnode tool's mkimage.py. `Err` says why it cannot be had here.
pub fn load_busybox_137(node: &RealNode) -> Result<&'static str, String> {
    let cache =
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/gangplank-test");
    std::fs::create_dir_all(&cache).map_err(|e| e.to_string())?;
    let deb = cache.join("busybox-static_1.37.deb");
    if sha256_file(&deb).as_deref() != Some(BUSYBOX_137_SHA256) {
        let url = format!("http://deb.debian.org/debian/{BUSYBOX_137_DEB}");
        run(Command::new("curl")
            .args(["-fsS", "--max-time", "60", "-o"])
            .arg(&deb)
            .arg(&url))
        .map_err(|e| format!("cannot download {url}: {e}"))?;
        let got = sha256_file(&deb).unwrap_or_default();
        if got != BUSYBOX_137_SHA256 {
            return Err(format!(
                "{url} has SHA-256 {got}, not the pinned {BUSYBOX_137_SHA256}"
            ));
        }
    }
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let rootfs = work.path().join("rootfs");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&rootfs))?;
    // Debian 13 is merged-/usr: the binary is /usr/bin/busybox; /bin links there.
    let bin = rootfs.join("usr/bin");
    let busybox = bin.join("busybox");
    std::os::unix::fs::symlink("usr/bin", rootfs.join("bin")).map_err(|e| e.to_string())?;
    let applets = Command::new(&busybox)
        .arg("--list")
        .output()
        .map_err(|e| format!("{}: {e}", busybox.display()))?;
    for applet in String::from_utf8_lossy(&applets.stdout).lines() {
        let link = bin.join(applet);
        if !link.exists() {
            std::os::unix::fs::symlink("busybox", &link).map_err(|e| e.to_string())?;
        }
    }
    for (path, text) in [
        (
            "etc/passwd",
            "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
        ),
        ("etc/group", "root:x:0:\nnobody:x:65534:\n"),
    ] {
        let file = rootfs.join(path);
        std::fs::create_dir_all(file.parent().unwrap_or(&rootfs)).map_err(|e| e.to_string())?;
        std::fs::write(file, text).map_err(|e| e.to_string())?;
    }
    let tarball = work.path().join("busybox-1.37.tar");
    let mkimage = node.tool_dir().join("mkimage.py");
    run(Command::new("python3")
        .arg(&mkimage)
        .arg(&rootfs)
        .arg(&tarball)
        .args(["--tag", BUSYBOX_137, "--entrypoint", r#"["/bin/sh"]"#]))?;
    node.import(&[&tarball]);
    Ok(BUSYBOX_137)
}

fn sha256_file(path: &std::path::Path) -> Option<String> {
    let out = Command::new("sha256sum").arg(path).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    out.status.success().then(|| {
        text.split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string()
    })
}

fn run(command: &mut Command) -> Result<(), String> {
    let out = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A one-pod PyTorchJob whose image is a tag (`busybox:latest`): what the `images` policy
/// refuses (deny by default), as JSON text for kubectl.
pub fn tag_only_job(name: &str, namespace: &str) -> String {
    json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
            "containers": [{"name": "pytorch", "image": "busybox:latest",
                            "imagePullPolicy": "Never", "command": ["true"]}]}}}}}
    })
    .to_string()
}
