//! Admission after create, on a real kube-apiserver with deploy/'s webhooks: the edits users
//! make to a job they already have, and its deletion.
//!
//! - Every edit path (`kubectl apply`, `apply --server-side`, `replace`, `edit`, a merge
//!   patch) scales a gang whose PodGroup `minAvailable` gangplank defaulted, down and up:
//!   `minAvailable` follows the Worker count. A value the user set is theirs, and checked.
//! - A policy tightened after a job was admitted never blocks that job's label edits,
//!   finalizer removal or deletion.
//!
//! The webhook server serves a copy of policies/ that one test tightens; the copy belongs to
//! this test binary.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{json, Value};
use support::{jobs, ControlPlane, Crds, Webhooks};

e2e_suite!(
    "e2e_updates",
    [
        scaling_through_kubectl_apply_recomputes_min_available,
        scaling_through_server_side_apply_recomputes_min_available,
        scaling_through_kubectl_replace_recomputes_min_available,
        scaling_through_kubectl_edit_recomputes_min_available,
        scaling_through_a_merge_patch_recomputes_min_available,
        a_min_available_the_user_set_is_kept_and_checked,
        a_tightened_policy_never_blocks_edits_finalizers_or_deletion_of_an_old_job,
    ]
);

/// The control plane, and webhooks serving this binary's own copy of policies/.
struct Env {
    control_plane: &'static ControlPlane,
    policies: PathBuf,
}

fn env() -> &'static Env {
    static ENV: OnceLock<(tempfile::TempDir, Env)> = OnceLock::new();
    let (_, env) = ENV.get_or_init(|| {
        let control_plane = ControlPlane::shared(&support::assets::get(), Crds::TrainingV1);
        let dir = tempfile::tempdir().expect("temp dir");
        let policies = dir.path().join("policies");
        copy_dir(&support::repo().join("policies"), &policies);
        let served = policies.clone();
        let webhooks = support::on_own_runtime(move || Webhooks::install(control_plane, served));
        // The server lives as long as the binary: its process guardian ends it at exit.
        std::mem::forget(webhooks);
        (
            dir,
            Env {
                control_plane,
                policies,
            },
        )
    });
    env
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let (path, target) = (entry.path(), to.join(entry.file_name()));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copy");
        }
    }
}

/// kubectl in one namespace of its own, with the job file it edits.
struct User {
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    namespace: String,
    client: kube::Client,
    dir: tempfile::TempDir,
}

impl User {
    async fn new(test: &str) -> User {
        let env = env();
        User {
            kubectl: env.control_plane.assets.kubectl(),
            kubeconfig: env.control_plane.kubeconfig.clone(),
            namespace: env.control_plane.namespace(test).await,
            client: env.control_plane.client().await,
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn run(&self, args: &[&str], editor: Option<&str>) -> Output {
        let mut command = Command::new(&self.kubectl);
        command
            .env_remove("KUBECONFIG")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--namespace", &self.namespace])
            .args(args);
        if let Some(editor) = editor {
            command.env("KUBE_EDITOR", editor).env("EDITOR", editor);
        }
        command.output().expect("run kubectl")
    }

    fn ok(&self, args: &[&str]) -> String {
        self.ok_with_editor(args, None)
    }

    fn ok_with_editor(&self, args: &[&str], editor: Option<&str>) -> String {
        let output = self.run(args, editor);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "kubectl {args:?}:\n{stderr}\n{stdout}"
        );
        stderr
    }

    /// Writes the job file with `workers` Workers; its path.
    fn write_job(&self, name: &str, workers: u32) -> String {
        let job = job(name, workers);
        let path = self.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, yaml_serde::to_string(&job).expect("YAML")).expect("write job");
        path.display().to_string()
    }

    async fn get(&self, name: &str) -> Value {
        let stored = jobs::pytorch_api(&self.client, &self.namespace)
            .get(name)
            .await;
        serde_json::to_value(stored.expect("job stored")).expect("JSON")
    }

    async fn min_available(&self, name: &str) -> Value {
        let job = self.get(name).await;
        job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"].clone()
    }

    async fn merge_patch(&self, name: &str, patch: &Value) -> Result<Value, kube::Error> {
        let api = jobs::pytorch_api(&self.client, &self.namespace);
        let patched = api
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(serde_json::to_value(patched).expect("JSON"))
    }
}

/// A PyTorchJob with 1 Master and `workers` Workers, written as users do: no scheduler,
/// no PodGroup settings, no runPolicy.
fn job(name: &str, workers: u32) -> Value {
    let mut job = jobs::pytorch_job(name, 1);
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers.into();
    job
}

/// Create with 8 Workers (minAvailable 9), then scale to 4 and to 12 with `scale`.
async fn scale_down_and_up(user: &User, name: &str, scale: impl Fn(&User, u32)) {
    let file = user.write_job(name, 8);
    user.ok(&["apply", "-f", &file]);
    assert_eq!(user.min_available(name).await, 9, "defaulted at create");
    scale(user, 4);
    assert_eq!(
        user.min_available(name).await,
        5,
        "after scaling Workers 8 → 4"
    );
    scale(user, 12);
    assert_eq!(
        user.min_available(name).await,
        13,
        "after scaling Workers 4 → 12"
    );
    let job = user.get(name).await;
    let workers = &job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"];
    assert_eq!(workers, 12, "{job:#}");
}

async fn scaling_through_kubectl_apply_recomputes_min_available() {
    let user = User::new("apply").await;
    scale_down_and_up(&user, "bert", |user, workers| {
        let file = user.write_job("bert", workers);
        user.ok(&["apply", "-f", &file]);
    })
    .await;
}

async fn scaling_through_server_side_apply_recomputes_min_available() {
    let user = User::new("server-side-apply").await;
    scale_down_and_up(&user, "bert", |user, workers| {
        let file = user.write_job("bert", workers);
        user.ok(&["apply", "--server-side", "--force-conflicts", "-f", &file]);
    })
    .await;
}

async fn scaling_through_kubectl_replace_recomputes_min_available() {
    let user = User::new("replace").await;
    scale_down_and_up(&user, "bert", |user, workers| {
        let file = user.write_job("bert", workers);
        user.ok(&["replace", "-f", &file]);
    })
    .await;
}

/// `kubectl edit` sends the whole stored object back, gangplank's minAvailable included:
/// the value is still the one gangplank wrote, so it is recomputed.
async fn scaling_through_kubectl_edit_recomputes_min_available() {
    let user = User::new("edit").await;
    scale_down_and_up(&user, "bert", |user, workers| {
        // The editor: a script that sets the Worker replicas in the file kubectl hands it.
        let script = user.dir.path().join(format!("editor-{workers}.sh"));
        let body = format!(
            "#!/bin/bash\nsed -i -E '/^    Worker:/,/^    [A-Z]/ s/^(      replicas: )[0-9]+/\\1{workers}/' \"$1\"\n"
        );
        std::fs::write(&script, body).expect("write editor");
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&script, mode).expect("chmod editor");
        let editor = script.display().to_string();
        user.ok_with_editor(&["edit", "pytorchjob", "bert"], Some(&editor));
    })
    .await;
}

async fn scaling_through_a_merge_patch_recomputes_min_available() {
    let user = User::new("merge-patch").await;
    let file = user.write_job("bert", 8);
    user.ok(&["apply", "-f", &file]);
    for (workers, expected) in [(4, 5), (12, 13)] {
        let patch = json!({"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": workers}}}});
        user.merge_patch("bert", &patch).await.expect("patched");
        assert_eq!(
            user.min_available("bert").await,
            expected,
            "Workers → {workers}"
        );
    }
}

/// A minAvailable the user writes is the user's: scaling keeps it, and a value above the
/// pod count is refused with the field named.
async fn a_min_available_the_user_set_is_kept_and_checked() {
    let user = User::new("user-set").await;
    let file = user.write_job("bert", 8);
    user.ok(&["apply", "-f", &file]);
    let own = json!({"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 7}}}});
    user.merge_patch("bert", &own).await.expect("user sets 7");
    let scale =
        |workers: u32| json!({"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": workers}}}});
    user.merge_patch("bert", &scale(10))
        .await
        .expect("scaled to 10");
    assert_eq!(
        user.min_available("bert").await,
        7,
        "the user's value is kept"
    );
    let (code, message) = jobs::refusal(user.merge_patch("bert", &scale(4)).await);
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains("/spec/runPolicy/schedulingPolicy/minAvailable"),
        "{message}"
    );
}

/// The job is admitted with backoffLimit 8; then the platform lowers the maximum to 5. Its
/// owner can still relabel it, delete it, and its controller can remove its finalizer.
async fn a_tightened_policy_never_blocks_edits_finalizers_or_deletion_of_an_old_job() {
    let user = User::new("tightened").await;
    let mut old = job("old-run", 2);
    old["spec"]["runPolicy"] = json!({"backoffLimit": 8});
    old["metadata"]["finalizers"] = json!(["example.com/hold"]);
    jobs::create(&user.client, &user.namespace, &old, false)
        .await
        .expect("admitted before the change");

    tighten_max_backoff_limit(&user, 5).await;

    let relabel = json!({"metadata": {"labels": {"team": "vision"}}});
    user.merge_patch("old-run", &relabel)
        .await
        .expect("label edit allowed");
    let api = jobs::pytorch_api(&user.client, &user.namespace);
    api.delete("old-run", &DeleteParams::default())
        .await
        .expect("delete allowed");
    let deleting = user.get("old-run").await;
    assert!(
        deleting["metadata"]["deletionTimestamp"].is_string(),
        "{deleting:#}"
    );
    let release = json!({"metadata": {"finalizers": null}});
    user.merge_patch("old-run", &release)
        .await
        .expect("finalizer removal allowed");
    support::wait_for("the job is gone", Duration::from_secs(10), || async {
        match api.get_opt("old-run").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// Sets run_policy's maxBackoffLimit in the served policies and waits until the server
/// refuses a new job above it.
async fn tighten_max_backoff_limit(user: &User, max: u32) {
    let params = env().policies.join("params.yaml");
    let text = std::fs::read_to_string(&params).expect("params.yaml");
    let tightened = text.replacen(
        "      ttlSecondsAfterFinished: 86400\n",
        &format!("      ttlSecondsAfterFinished: 86400\n      maxBackoffLimit: {max}\n"),
        1,
    );
    assert_ne!(
        text, tightened,
        "params.yaml has no run_policy params to extend"
    );
    std::fs::write(&params, tightened).expect("write params.yaml");
    let mut probe = job("reload-probe", 2);
    probe["spec"]["runPolicy"] = json!({"backoffLimit": max + 1});
    support::wait_for(
        "the tightened policy served",
        Duration::from_secs(30),
        || async {
            match jobs::create(&user.client, &user.namespace, &probe, true).await {
                Err(kube::Error::Api(status)) if status.code == 403 => Ok(()),
                other => Err(format!("still admitted: {other:?}")),
            }
        },
    )
    .await;
}
