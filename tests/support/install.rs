//! gangplank installed on the real node as a user installs it: its image (what `.ci/image`
//! built) loaded into the node, deploy/ and deploy/controller applied with `kubectl apply -k`
//! from an overlay, the certificate made with `gangplank certs` (certs/README.md, path 2),
//! and the Deployments rolled out by the kubelet.
//!
//! Entry points: [`image_requirement`] (the built image, or why the suite skips),
//! [`Install::run`]. The overlay is what a one-node cluster with Kubernetes' native gang and
//! no registry needs: the image renamed to the loaded one, `params.yaml` with `scheduler:
//! kubernetes`, the controller's `--gang-scheduler=kubernetes` and an init image the node has.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::realnode::{RealNode, BUSYBOX};

/// Where `.ci/image` writes the layout: `GANGPLANK_IMAGE_DIR`, else `target/image`.
pub fn image_dir() -> PathBuf {
    std::env::var_os("GANGPLANK_IMAGE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| super::repo().join("target/image"))
}

/// The real node's requirement, and the image built.
pub fn image_requirement() -> Result<(), String> {
    super::realnode::requirement()?;
    let archive = image_dir().join("image.tar");
    if archive.is_file() {
        Ok(())
    } else {
        Err(format!(
            "no gangplank image at {} (build it with .ci/image, as .ci/run does first, or set \
             GANGPLANK_IMAGE_DIR)",
            archive.display()
        ))
    }
}

/// The name the layout's index gives the image (containerd's annotation).
fn image_name(dir: &Path) -> String {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).expect("index.json"))
            .expect("index.json is JSON");
    index["manifests"][0]["annotations"]["io.containerd.image.name"]
        .as_str()
        .expect("the image's name in index.json")
        .to_string()
}

pub const NAMESPACE: &str = "gangplank-system";

/// An installed gangplank.
pub struct Install {
    /// `<name>:<tag>` of the loaded image.
    pub image: String,
    /// How long `kubectl apply -k` to both Deployments Available took.
    pub rollout: Duration,
    /// How long after that the apiserver first reached the webhooks through their Service.
    pub answering: Duration,
    /// `<ClusterIP>:443` of the webhook Service, and the CA of its certificate.
    pub service: String,
    pub ca: PathBuf,
    /// The overlay applied (its params.yaml is what the pods serve).
    pub overlay: PathBuf,
}

/// The namespace the install probes through: labelled for deploy/opt-in (harmless without it).
pub const PROBE_NAMESPACE: &str = "gangplank-probe";

/// Waits until the apiserver reaches the webhooks: a server dry run of a job in a namespace
/// the policies judge is answered by them: denied, or returned mutated (the runPolicy
/// defaults). Success alone is not enough: with deploy/fail-open an unreachable webhook lets
/// the job through unchanged. Ready pods are not enough either: their endpoints and
/// kube-proxy's rules follow a moment later, and until then failurePolicy Fail refuses every
/// job (deploy/README.md says to wait).
pub fn wait_until_the_webhooks_answer(node: &RealNode) -> Duration {
    let began = std::time::Instant::now();
    let probe = format!(
        r#"{{"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{{"name":"probe","namespace":"{PROBE_NAMESPACE}"}},"spec":{{"pytorchReplicaSpecs":{{"Master":{{"replicas":1,"template":{{"spec":{{"containers":[{{"name":"pytorch","image":"x"}}]}}}}}}}}}}}}"#
    );
    let file = node.dir.path().join("probe.json");
    std::fs::write(&file, probe).expect("write probe");
    let path = file.display().to_string();
    loop {
        let out = node.kubectl(&["create", "--dry-run=server", "-o", "json", "-f", &path]);
        let text = String::from_utf8_lossy(&out.stderr).to_string();
        let returned: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let mutated = !returned["spec"]["runPolicy"]["cleanPodPolicy"].is_null();
        if mutated || text.contains("denied the request") {
            return began.elapsed();
        }
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "the apiserver never reached the webhooks: {text}\n{}",
            describe(node)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What goes into the install's overlay besides deploy/.
pub struct Overlay {
    /// The overlay's directory under target/ (kustomize takes relative paths only).
    pub dir: &'static str,
    /// deploy/ components, after the controller and the cluster inventory.
    pub components: &'static [&'static str],
}

/// deploy/ with the controller and the inventory, as the install suite applies it.
pub const DEFAULT_OVERLAY: Overlay = Overlay {
    dir: "realnode-install",
    components: &[],
};

impl Install {
    /// Loads the image, applies the overlay, provides the certificate and waits for both
    /// Deployments; panics with what the cluster says when any step fails.
    pub fn run(node: &RealNode) -> Install {
        Install::run_with(node, &DEFAULT_OVERLAY)
    }

    /// [`Install::run`] with `overlay`'s components.
    pub fn run_with(node: &RealNode, overlay: &Overlay) -> Install {
        let dir = image_dir();
        node.import(&[&dir.join("image.tar")]);
        let image = image_name(&dir);
        let overlay = write_overlay(&image, overlay);
        let began = std::time::Instant::now();
        // The training CRDs come first, as crds/README.md has a user install them.
        super::realnode_jobs::install_crds(node);
        kubectl_ok(node, &["create", "namespace", PROBE_NAMESPACE]);
        kubectl_ok(
            node,
            &[
                "label",
                "namespace",
                PROBE_NAMESPACE,
                "gangplank.dev/admission=enabled",
            ],
        );
        kubectl_ok(node, &["apply", "-k", overlay.to_str().expect("path")]);
        // The certificate names the Service's DNS names, and its ClusterIP too so that a
        // load generator on the host can verify it (`gangplank bench` dials the IP); the
        // pods wait in ContainerCreating until the Secret exists (certs/README.md).
        let cluster_ip = kubectl_ok(
            node,
            &[
                "-n",
                NAMESPACE,
                "get",
                "service",
                "gangplank-webhook",
                "-o",
                "jsonpath={.spec.clusterIP}",
            ],
        );
        let certs = node.dir.path().join("gangplank-certs");
        let out = std::process::Command::new(super::gangplank())
            .args(["certs", "--out"])
            .arg(&certs)
            .args([
                "--dns",
                "gangplank-webhook.gangplank-system.svc",
                "--dns",
                &format!("gangplank-webhook.gangplank-system.svc.{}", node.domain),
                "--dns",
                cluster_ip.trim(),
            ])
            .output()
            .expect("gangplank certs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cert = |flag: &str, file: &str| format!("--{flag}={}", certs.join(file).display());
        kubectl_ok(
            node,
            &[
                "-n",
                NAMESPACE,
                "create",
                "secret",
                "tls",
                "gangplank-webhook-tls",
                &cert("cert", "tls.crt"),
                &cert("key", "tls.key"),
            ],
        );
        let ca = std::fs::read(certs.join("ca.crt")).expect("ca.crt");
        let bundle = base64_encode(&ca);
        for kind in [
            "mutatingwebhookconfiguration",
            "validatingwebhookconfiguration",
        ] {
            let patch = format!(
                r#"[{{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"{bundle}"}}]"#
            );
            kubectl_ok(
                node,
                &["patch", kind, "gangplank", "--type=json", "-p", &patch],
            );
        }
        for deployment in ["gangplank-webhook", "gangplank-controller"] {
            let out = node.kubectl(&[
                "-n",
                NAMESPACE,
                "rollout",
                "status",
                &format!("deployment/{deployment}"),
                "--timeout=240s",
            ]);
            assert!(
                out.status.success(),
                "{deployment} did not roll out: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                describe(node)
            );
        }
        let rollout = began.elapsed();
        let answering = wait_until_the_webhooks_answer(node);
        Install {
            image,
            rollout,
            answering,
            service: format!("{}:443", cluster_ip.trim()),
            ca: certs.join("ca.crt"),
            overlay,
        }
    }
}

/// Where deploy/controller's Deployment passes `--gang-scheduler=volcano`: the overlay's
/// JSON patch addresses the argument by index (and `test`s it, so a moved one fails here).
fn gang_scheduler_arg_index() -> usize {
    let path = super::repo().join("deploy/controller/deployment.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/controller/deployment.yaml");
    let deployment: serde_json::Value =
        yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .and_then(|args| args.iter().position(|a| a == "--gang-scheduler=volcano"))
        .expect("deploy/controller passes --gang-scheduler=volcano")
}

/// The overlay beside the repository (kustomize takes relative paths only), rewritten on
/// every run.
fn write_overlay(image: &str, spec: &Overlay) -> PathBuf {
    let overlay = super::repo().join("target").join(spec.dir);
    std::fs::create_dir_all(&overlay).expect("overlay dir");
    let (name, tag) = image.rsplit_once(':').expect("name:tag");
    let params = std::fs::read_to_string(super::repo().join("policies/params.yaml"))
        .expect("policies/params.yaml");
    let line = "      scheduler: volcano\n";
    assert!(
        params.contains(line),
        "params.yaml no longer says `{}`",
        line.trim()
    );
    std::fs::write(
        overlay.join("params.yaml"),
        params.replacen(line, "      scheduler: kubernetes\n", 1),
    )
    .expect("write params.yaml");
    let components = ["controller", "cluster-inventory"]
        .iter()
        .chain(spec.components)
        .map(|c| format!("../../deploy/{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let gang = gang_scheduler_arg_index();
    let kustomization = format!(
        r#"# Written by tests/support/install.rs: gangplank on a one-node cluster with Kubernetes'
# native gang, its image loaded into the node (no registry).
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../../deploy]
# The inventory, so capacity is judged against the node at create.
components: [{components}]
images:
  - name: ghcr.io/gangplank-dev/gangplank
    newName: {name}
    newTag: "{tag}"
generatorOptions:
  disableNameSuffixHash: true
configMapGenerator:
  - name: gangplank-policies
    namespace: gangplank-system
    behavior: merge
    files: [params.yaml]
patches:
  - target: {{kind: Deployment, name: gangplank-controller}}
    patch: |-
      - op: test
        path: /spec/template/spec/containers/0/args/{gang}
        value: --gang-scheduler=volcano
      - op: replace
        path: /spec/template/spec/containers/0/args/{gang}
        value: --gang-scheduler=kubernetes
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --pytorch-init-image={BUSYBOX}
"#
    );
    std::fs::write(overlay.join("kustomization.yaml"), kustomization).expect("write overlay");
    overlay
}

/// `kubectl scale` of the webhook Deployment to `replicas`.
pub fn scale_webhook(node: &RealNode, replicas: u32) {
    kubectl_ok(
        node,
        &[
            "-n",
            NAMESPACE,
            "scale",
            "deployment/gangplank-webhook",
            &format!("--replicas={replicas}"),
        ],
    );
}

/// Creates namespace `name` (unless it exists) as one the installed controller serves:
/// labelled gangplank.dev/managed=true, as docs/src/install.md tells users to (deploy/
/// controller's allow-list policy refuses the controller's writes anywhere else).
pub fn managed_namespace(node: &RealNode, name: &str) {
    let _ = node.kubectl(&["create", "namespace", name]);
    let label = "gangplank.dev/managed=true";
    kubectl_ok(node, &["label", "namespace", name, label, "--overwrite"]);
}

pub fn kubectl_ok(node: &RealNode, args: &[&str]) -> String {
    let out = node.kubectl(args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl {}: {text}", args.join(" "));
    text
}

/// The pods of gangplank-system and the recent events: what a failed rollout shows.
pub fn describe(node: &RealNode) -> String {
    let pods = node.kubectl(&["-n", NAMESPACE, "get", "pods", "-o", "wide"]);
    let events = node.kubectl(&["-n", NAMESPACE, "get", "events", "--sort-by=.lastTimestamp"]);
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&pods.stdout),
        String::from_utf8_lossy(&events.stdout)
    )
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
