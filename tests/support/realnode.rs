//! A real node for the suites whose behaviour lives in the kubelet (init containers, DNS,
//! restarts, probes, limits): `../shared/tools/realnode/realnode.sh` starts etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler, a kubelet, kube-proxy, containerd,
//! a CNI bridge and a cluster DNS on this machine, offline.
//!
//! Entry points: [`requirement`] (why the suite cannot run here, if it cannot), [`RealNode::start`]
//! (reset, then start, with the cluster DNS domain the suite asks for), [`RealNode::stop`];
//! [`RealNode::kubectl`], [`RealNode::client`], [`RealNode::import`] for images made with
//! `mkimage.py`, [`RealNode::spawn`] for a gangplank process on the host with the admin
//! kubeconfig.
//!
//! One node runs per machine: the suites that use it are separate test binaries, which cargo
//! runs one after the other; each starts the node afresh (`reset`: no objects of an earlier
//! run) and stops it before it exits. A guardian stops it too when the binary is killed, so
//! nothing is left running: no daemon, no iptables rule, no mount (what `realnode.sh stop`
//! removes).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::process::Process;

/// The default domain; any other is started from a copy of the tool whose domain is set.
pub const DEFAULT_DOMAIN: &str = "cluster.local";

/// The image every realnode has: busybox 1.35 from Debian's busybox-static.
pub const BUSYBOX: &str = "localhost/realnode/busybox:1.35";

/// Where the tool is: `GANGPLANK_REALNODE` (its directory), else beside the workplace.
fn tool_dir() -> PathBuf {
    std::env::var_os("GANGPLANK_REALNODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| super::repo().join("../shared/tools/realnode"))
}

/// Why a real node cannot start on this machine, or `Ok`.
pub fn requirement() -> Result<(), String> {
    let script = tool_dir().join("realnode.sh");
    if !script.is_file() {
        return Err(format!(
            "no real node tool at {} (set GANGPLANK_REALNODE to a copy of shared/tools/realnode)",
            script.display()
        ));
    }
    if !is_root() {
        return Err(
            "a kubelet, containerd and the CNI bridge need root, and this test runs as another user"
                .to_string(),
        );
    }
    if !Path::new("/sys/fs/cgroup").is_dir() {
        return Err("no cgroup filesystem at /sys/fs/cgroup: a kubelet cannot run here".into());
    }
    let assets = super::assets::find()?;
    let kubelet = ["kubelet", "kube-proxy"]
        .into_iter()
        .find(|b| !assets.dir.join(b).is_file() && !state_dir().join("bin").join(b).is_file());
    if let Some(missing) = kubelet {
        return Err(format!(
            "no {missing} in {} nor in {}/bin (../shared/tools/kube-test-assets.sh builds it \
             beside the control plane; FORCE=1 rebuilds an older cache)",
            assets.dir.display(),
            state_dir().display()
        ));
    }
    Ok(())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The tool's state (binaries and images are built there once and kept).
fn state_dir() -> PathBuf {
    std::env::var_os("REALNODE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/realnode")
        })
}

/// A started node.
pub struct RealNode {
    script: PathBuf,
    assets: PathBuf,
    pub kubeconfig: PathBuf,
    pub kubectl: PathBuf,
    pub domain: String,
    /// Logs of the processes this suite starts, and the tool's copy for another domain.
    pub dir: tempfile::TempDir,
    /// Stops the node when this process ends however it ends (see the module doc); killed
    /// by an orderly [`RealNode::stop`], so that it cannot stop the next suite's node.
    guardian: std::sync::Mutex<Option<Child>>,
    /// How long `start` took (reset excluded): a figure for BENCHMARKS.md.
    pub start_time: Duration,
    /// Held while this node lives (see [`one_node_at_a_time`]).
    _machine_lock: std::fs::File,
}

/// One node per machine, and every suite resets it: a suite of another checkout (CI beside a
/// developer) waits here for the running one to end rather than reset its node under it. An
/// exclusive lock on a file; the kernel releases it when the holder exits, however it exits.
fn one_node_at_a_time() -> Result<std::fs::File, String> {
    let dir = Path::new("/run/lock");
    let dir = if dir.is_dir() {
        dir.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let path = dir.join("gangplank-realnode.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if file.try_lock().is_err() {
        let _ = writeln_stderr(&format!(
            "realnode: another real-node suite holds {}; waiting for it to end",
            path.display()
        ));
        file.lock()
            .map_err(|e| format!("lock {}: {e}", path.display()))?;
    }
    Ok(file)
}

/// The longest a start may take: the first one on a machine builds the pause and busybox
/// images (seconds); kubelet and kube-proxy come built with the control plane's binaries.
const START_LIMIT: Duration = Duration::from_secs(600);
pub const STOP_LIMIT: Duration = Duration::from_secs(120);

impl RealNode {
    /// Resets the node's state, starts it with `domain` as the cluster domain and waits for
    /// it to be Ready. Panics with the tool's output when it does not start in time.
    pub fn start(domain: &str) -> RealNode {
        RealNode::try_start(domain, START_LIMIT, |_| Ok(()))
            .unwrap_or_else(|why| panic!("realnode start: {why}"))
    }

    /// As [`RealNode::start`] within `limit`, with `prepare` run on the node's state directory
    /// between the reset and the start. A node that does not come up is stopped (nothing left
    /// running, no iptables rule, no mount) and the error says why: the tool's words, the
    /// node's Ready condition as the kubelet reported it, and the runtime's CNI complaints.
    pub fn try_start(
        domain: &str,
        limit: Duration,
        prepare: impl FnOnce(&Path) -> Result<(), String>,
    ) -> Result<RealNode, String> {
        let dir = tempfile::Builder::new()
            .prefix("gangplank-realnode-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let script = script_for(domain, dir.path());
        let assets = super::assets::get().dir;
        let machine_lock = one_node_at_a_time()?;
        let mut node = RealNode {
            kubeconfig: PathBuf::new(),
            kubectl: assets.join("kubectl"),
            script,
            assets,
            domain: domain.to_string(),
            dir,
            guardian: std::sync::Mutex::new(None),
            start_time: Duration::ZERO,
            _machine_lock: machine_lock,
        };
        // A node left by a killed run, or another suite's: start from nothing.
        node.run_tool("reset", &[], STOP_LIMIT)
            .map_err(|why| format!("realnode reset: {why}"))?;
        prepare(&state_dir())?;
        let guardian = node.guardian();
        node.guardian = std::sync::Mutex::new(Some(guardian));
        let began = Instant::now();
        if let Err(why) = node.run_tool("start", &[], limit) {
            let diagnosis = node.why_not_ready();
            node.stop();
            return Err(format!("{why}\n{diagnosis}"));
        }
        node.start_time = began.elapsed();
        let path = node
            .run_tool("kubeconfig", &[], Duration::from_secs(10))
            .map_err(|why| format!("realnode kubeconfig: {why}"))?;
        node.kubeconfig = PathBuf::from(path.trim());
        Ok(node)
    }

    /// What the node's Ready condition says (the kubelet's reason), and what the container
    /// runtime logged about CNI, the usual cause of a node that never becomes Ready.
    fn why_not_ready(&self) -> String {
        let jsonpath = r#"jsonpath={range .status.conditions[?(@.type=="Ready")]}{.status} {.reason}: {.message}{end}"#;
        let ready = self
            .run_tool(
                "kubectl",
                &["get", "node", "realnode", "-o", jsonpath],
                Duration::from_secs(20),
            )
            .unwrap_or_else(|why| format!("(no node registered: {why})"));
        let log = state_dir().join("logs/containerd.log");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let complaint = |l: &&str| l.contains("level=error") || l.contains("level=warn");
        let cni: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("cni") && complaint(l))
            .collect();
        let cni = cni[cni.len().saturating_sub(3)..].join("\n");
        format!(
            "the node's Ready condition: {}\nthe runtime on CNI ({}):\n{cni}",
            ready.trim(),
            log.display()
        )
    }

    /// Stops every daemon and removes what the node added to the machine.
    pub fn stop(&self) {
        if let Err(why) = self.run_tool("stop", &[], STOP_LIMIT) {
            super::skip(&format!("realnode stop failed: {why}"));
            return;
        }
        let guardian = self.guardian.lock().map(|mut g| g.take());
        if let Ok(Some(mut guardian)) = guardian {
            let _ = guardian.kill();
            let _ = guardian.wait();
        }
    }

    /// Runs `realnode.sh <command> <args>` within `limit`; its stdout, or why it failed
    /// (exit status and the end of its output).
    fn run_tool(&self, command: &str, args: &[&str], limit: Duration) -> Result<String, String> {
        let log = self.dir.path().join(format!("realnode-{command}.log"));
        let err = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let mut child = self
            .tool_command()
            .arg(command)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.script.display()))?;
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "did not finish within {limit:?}; its log ends:\n{}",
                    tail(&log, 30)
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let mut out = String::new();
        if let Some(mut stdout) = child.stdout.take() {
            use std::io::Read as _;
            let _ = stdout.read_to_string(&mut out);
        }
        if status.success() {
            Ok(out)
        } else {
            Err(format!("{status}; its log ends:\n{}", tail(&log, 30)))
        }
    }

    fn tool_command(&self) -> Command {
        let mut command = Command::new("bash");
        let gates = format!(
            "--feature-gates={}",
            super::control_plane::NATIVE_GANG_GATES
        );
        command
            .arg(&self.script)
            .env("KUBEBUILDER_ASSETS", &self.assets)
            .env("REALNODE_DIR", state_dir())
            // Kubernetes' native gang (scheduling.k8s.io/v1alpha2 PodGroups), as the
            // controller's --gang-scheduler=kubernetes needs it: the API and its scheduler
            // plugin are alpha, off unless asked.
            .env(
                "REALNODE_APISERVER_ARGS",
                format!("{gates} --runtime-config=scheduling.k8s.io/v1alpha2=true"),
            )
            .env("REALNODE_SCHEDULER_ARGS", &gates)
            .env("REALNODE_KCM_ARGS", &gates);
        command
    }

    /// `bash -c 'read; realnode.sh stop'` with its stdin a pipe from this process: when the
    /// process ends, even killed, the pipe closes and the node stops.
    fn guardian(&self) -> Child {
        Command::new("bash")
            .arg("-c")
            .arg(r#"read -r _; exec bash "$1" stop >/dev/null 2>&1"#)
            .arg("realnode-guardian")
            .arg(&self.script)
            .env("KUBEBUILDER_ASSETS", &self.assets)
            .env("REALNODE_DIR", state_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the realnode guardian")
    }

    /// The tool's directory (mkimage.py is beside realnode.sh).
    pub fn tool_dir(&self) -> PathBuf {
        self.script
            .parent()
            .map_or_else(tool_dir, Path::to_path_buf)
    }

    /// kubectl with the admin kubeconfig; the output, whatever the exit status.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("kubectl: {e}"))
    }

    /// `kubectl apply -f -` of `manifest`; panics with kubectl's words when it fails.
    pub fn apply(&self, manifest: &str) -> String {
        let out = self.kubectl_stdin(&["apply", "-f", "-"], manifest);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "kubectl apply failed: {text}");
        text
    }

    /// kubectl `args` with `input` on its stdin; the output, whatever the exit status.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        let mut child = Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("kubectl: {e}"));
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write as _;
            stdin.write_all(input.as_bytes()).expect("kubectl stdin");
        }
        child.wait_with_output().expect("kubectl")
    }

    /// The manifest digest of image `name` in the node's containerd.
    pub fn image_digest(&self, name: &str) -> Option<String> {
        let filter = format!("name=={name}");
        let out = self
            .run_tool("ctr", &["images", "ls", &filter], Duration::from_secs(30))
            .ok()?;
        // REF TYPE DIGEST SIZE PLATFORMS LABELS
        out.lines()
            .skip(1)
            .find_map(|line| line.split_whitespace().nth(2).map(String::from))
    }

    /// `name@<digest>` of an image in the node, usable in a pod: containerd's CRI finds an
    /// image by digest only under a `repository@digest` name, which it records when it pulls
    /// and `ctr import` does not, so the name is added here (as a pull would have).
    pub fn pinned(&self, name: &str) -> String {
        let digest = self
            .image_digest(name)
            .unwrap_or_else(|| panic!("{name} is not in the node"));
        let repository = name.rsplit_once(':').map_or(name, |(r, _)| r);
        let by_digest = format!("{repository}@{digest}");
        if let Err(why) = self.run_tool(
            "ctr",
            &["images", "tag", "--force", name, &by_digest],
            Duration::from_secs(30),
        ) {
            panic!("ctr images tag {name} {by_digest}: {why}");
        }
        format!("{name}@{digest}")
    }

    /// The runtime's OCI spec of container `id` (`ctr containers info`): what the kubelet
    /// really asked runc for.
    pub fn container_spec(&self, id: &str) -> serde_json::Value {
        let out = self
            .run_tool("ctr", &["containers", "info", id], Duration::from_secs(30))
            .unwrap_or_else(|why| panic!("ctr containers info {id}: {why}"));
        let info: serde_json::Value = serde_json::from_str(&out).expect("ctr prints JSON");
        info["Spec"].clone()
    }

    /// SIGKILLs container `id` through the runtime (`ctr tasks kill`), as an OOM or a crash
    /// would end it: the kubelet sees it exit.
    pub fn kill_container(&self, id: &str) {
        if let Err(why) = self.run_tool(
            "ctr",
            &["tasks", "kill", "--signal", "SIGKILL", id],
            Duration::from_secs(30),
        ) {
            panic!("ctr tasks kill {id}: {why}");
        }
    }

    /// Imports image tarballs into the node's containerd; panics naming them when it cannot.
    pub fn import(&self, tarballs: &[&Path]) {
        if let Err(why) = self.try_import(tarballs) {
            panic!("{why}");
        }
    }

    /// As [`RealNode::import`], the failure as an error naming the tarballs.
    pub fn try_import(&self, tarballs: &[&Path]) -> Result<(), String> {
        let args: Vec<&str> = tarballs.iter().filter_map(|p| p.to_str()).collect();
        self.run_tool("images", &args, Duration::from_secs(120))
            .map(drop)
            .map_err(|why| format!("the node could not load {args:?}: {why}"))
    }

    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)
            .unwrap_or_else(|e| panic!("read {}: {e}", self.kubeconfig.display()));
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .unwrap_or_else(|e| panic!("kubeconfig: {e}"));
        kube::Client::try_from(config).unwrap_or_else(|e| panic!("client: {e}"))
    }

    /// `gangplank <args>` on the host with the admin kubeconfig, its log in the suite's dir.
    pub fn spawn(&self, name: &str, args: &[&str]) -> Process {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let kubeconfig = self.kubeconfig.display().to_string();
        let env = [
            ("KUBECONFIG", kubeconfig.as_str()),
            ("RUST_LOG", "info,kube=warn"),
        ];
        Process::spawn_with_env(name, super::gangplank(), &args, &env, self.dir.path())
    }
}

/// The tool's script for `domain`: the shared one for the default domain; for another, a copy
/// of the tool (with kube-test-assets.sh beside it, which it calls to build) whose `DOMAIN`
/// line names it. The tool has no setting for its domain; a changed line is refused rather
/// than silently started with the default.
fn script_for(domain: &str, work: &Path) -> PathBuf {
    let tool = tool_dir();
    if domain == DEFAULT_DOMAIN {
        return tool.join("realnode.sh");
    }
    let copy = work.join("tools/realnode");
    std::fs::create_dir_all(&copy).expect("tool copy dir");
    for entry in std::fs::read_dir(&tool)
        .expect("read the realnode tool")
        .flatten()
    {
        if entry.path().is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).expect("copy the tool");
        }
    }
    let assets_script = tool.join("../kube-test-assets.sh");
    if assets_script.is_file() {
        std::fs::copy(&assets_script, work.join("tools/kube-test-assets.sh")).expect("copy");
    }
    let script = copy.join("realnode.sh");
    let text = std::fs::read_to_string(&script).expect("read realnode.sh");
    let line = format!("DOMAIN={DEFAULT_DOMAIN}\n");
    assert!(
        text.contains(&line),
        "{} no longer sets its domain on a line `{}`: teach tests/support/realnode.rs the new way",
        tool.display(),
        line.trim()
    );
    std::fs::write(
        &script,
        text.replacen(&line, &format!("DOMAIN={domain}\n"), 1),
    )
    .expect("write the tool copy");
    script
}

/// What a node left on this machine: its daemons (any process whose command line names the
/// state directory), its iptables rules (the guard chain, kube-proxy's and the kubelet's
/// chains), its mounts (under the state directory, the pods' network namespaces) and its
/// bridge. Empty when nothing is left.
pub fn leftovers() -> Vec<String> {
    let state = state_dir().display().to_string();
    let me = std::process::id().to_string();
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = entry.file_name().to_string_lossy().to_string();
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if pid != me && cmdline.contains(&state) {
            left.push(format!("process {pid}: {}", cmdline.trim()));
        }
    }
    let rules = Command::new("iptables-save").output();
    let rules = rules.map(|o| String::from_utf8_lossy(&o.stdout).to_string());
    for rule in rules.unwrap_or_default().lines() {
        if rule.contains("RN-GUARD") || rule.contains("KUBE-") {
            left.push(format!("iptables: {rule}"));
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for mount in mounts.lines() {
        if mount.contains(&state) || mount.contains("/netns/cni-") {
            left.push(format!("mount: {mount}"));
        }
    }
    let bridge = std::env::var("REALNODE_BRIDGE").unwrap_or_else(|_| "rnbr0".into());
    if Path::new("/sys/class/net").join(&bridge).exists() {
        left.push(format!("bridge {bridge}"));
    }
    left
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The node of this test binary, started by the first test that asks for it.
static NODE: std::sync::OnceLock<RealNode> = std::sync::OnceLock::new();
static NODE_DOMAIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The suite's node (see [`run_suite`]).
pub fn node() -> &'static RealNode {
    NODE.get_or_init(|| {
        let domain = NODE_DOMAIN.get().map_or(DEFAULT_DOMAIN, String::as_str);
        let node = RealNode::start(domain);
        let _ = writeln_stderr(&format!(
            "realnode: node Ready with domain {domain} in {:.1} s",
            node.start_time.as_secs_f64()
        ));
        node
    })
}

fn writeln_stderr(line: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    writeln!(std::io::stderr(), "{line}")
}

/// `fn main` of a real-node suite: every test reported as ignored, after one line saying
/// why, when [`requirement`] fails; otherwise the tests run against one node of `domain`,
/// which is stopped before the binary exits.
pub fn run_suite(suite: &str, domain: &str, tests: Vec<(&'static str, super::harness::Test)>) -> ! {
    run_suite_with(suite, domain, requirement, tests)
}

/// As [`run_suite`], with the suite's own requirement (which includes [`requirement`]).
pub fn run_suite_with(
    suite: &str,
    domain: &str,
    requirement: fn() -> Result<(), String>,
    tests: Vec<(&'static str, super::harness::Test)>,
) -> ! {
    let mut args = libtest_mimic::Arguments::from_args();
    // One node, one test at a time: tests that restart the webhooks or patch the node must
    // not meet another test's traffic (each suite stays around a minute).
    args.test_threads.get_or_insert(1);
    let _ = NODE_DOMAIN.set(domain.to_string());
    let missing = requirement().err();
    if let Some(why) = &missing {
        super::skip(&format!("{suite}: every test ignored: {why}"));
    }
    let trials = super::harness::trials(tests, missing.is_some());
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(node) = NODE.get() {
        node.stop();
    }
    conclusion.exit()
}
