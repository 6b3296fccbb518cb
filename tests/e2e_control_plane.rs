//! The test control plane's own failure modes, with stand-in binaries (small scripts), so
//! these run on every machine: a server that dies fails the start at once with its log, a
//! lost port race is retried, and nothing is left running afterwards.

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use support::assets::Assets;
use support::{ControlPlane, Crds};

/// An assets directory whose etcd and kube-apiserver are the given shell scripts.
fn stand_ins(dir: &Path, etcd: &str, kube_apiserver: &str) -> Assets {
    for (name, body) in [
        ("etcd", etcd),
        ("kube-apiserver", kube_apiserver),
        ("kubectl", "exit 1"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).expect("write stand-in");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    Assets {
        dir: dir.to_path_buf(),
    }
}

/// The panic message of `ControlPlane::start` with these assets.
fn start_failure(assets: &Assets) -> String {
    let assets = assets.clone();
    let result = std::thread::spawn(move || ControlPlane::start(&assets, Crds::TrainingV1)).join();
    let payload = match result {
        Ok(_) => panic!("the control plane started with stand-in binaries"),
        Err(payload) => payload,
    };
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Processes whose command line mentions `dir`.
fn running_from(dir: &Path) -> Vec<String> {
    let needle = dir.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&needle))
        .collect()
}

#[test]
fn a_server_that_exits_fails_the_start_at_once_with_its_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let assets = stand_ins(
        dir.path(),
        "echo 'etcdmain: the data dir is on fire' >&2; exit 3",
        "exec sleep 300",
    );
    let message = start_failure(&assets);
    assert!(
        message.contains("the test control plane did not start"),
        "{message}"
    );
    assert!(message.contains("etcd exited"), "{message}");
    assert!(message.contains("the data dir is on fire"), "{message}");
    // The stand-in apiserver (sleep 300) was killed with the failed attempt.
    assert_eq!(running_from(dir.path()), Vec::<String>::new());
}

#[test]
fn a_lost_port_race_is_retried_then_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let assets = stand_ins(
        dir.path(),
        "echo \"$(date +%s%N)\" >> \"$(dirname \"$0\")/attempts\"
         echo 'listen tcp 127.0.0.1:2379: bind: address already in use' >&2; exit 1",
        "exec sleep 300",
    );
    let message = start_failure(&assets);
    assert!(message.contains("after 3 attempts"), "{message}");
    assert!(message.contains("address already in use"), "{message}");
    let attempts = std::fs::read_to_string(dir.path().join("attempts")).expect("attempts");
    assert_eq!(
        attempts.lines().count(),
        3,
        "each attempt started etcd once"
    );
    assert_eq!(running_from(dir.path()), Vec::<String>::new());
}
