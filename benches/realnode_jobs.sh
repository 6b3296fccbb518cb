#!/usr/bin/env bash
# Real pods (issue 40): job create → Succeeded for every kind at 2 and 4 ranks on the real node
# (../shared/tools/realnode), the ranks running examples/allreduce.rs as e2e_realnode_jobs
# runs it, one host controller for every kind with the native gang. Prints one line per job.
#
# Times are from `kubectl apply` to the Succeeded condition, polled with kubectl every 250 ms.
# Needs root; resets and stops the node, holding the suites' machine-wide lock meanwhile.
#
# Usage: benches/realnode_jobs.sh   (after cargo build --example allreduce --bin gangplank;
#        ROUNDS=2 to run every job twice, KUBEBUILDER_ASSETS for another control plane)
set -euo pipefail
cd "$(dirname "$0")/.."
tool=${GANGPLANK_REALNODE:-../shared/tools/realnode}
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$HOME/.cache/kube-test-assets/v1.36.2}
# The native gang, as tests/support/realnode.rs starts the node.
gates="--feature-gates=GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"
export REALNODE_APISERVER_ARGS="$gates --runtime-config=scheduling.k8s.io/v1alpha2=true"
export REALNODE_SCHEDULER_ARGS="$gates" REALNODE_KCM_ARGS="$gates"
work=$(mktemp -d)
exec 9>/run/lock/gangplank-realnode.lock
flock 9
bash "$tool/realnode.sh" reset >/dev/null 2>&1
trap 'kill "${controller:-0}" 2>/dev/null || true; bash "$tool/realnode.sh" stop >/dev/null 2>&1; rm -rf "$work"' EXIT
bash "$tool/realnode.sh" start >"$work/start.log" 2>&1
kubeconfig=$(bash "$tool/realnode.sh" kubeconfig)
kubectl=$KUBEBUILDER_ASSETS/kubectl
python3 "$tool/mkimage.py" "$work/allreduce.tar" --binary target/debug/examples/allreduce:/allreduce \
  --with-libs --tag localhost/gangplank-test/allreduce:1 >/dev/null
bash "$tool/realnode.sh" images "$work/allreduce.tar" >/dev/null 2>&1
"$kubectl" --kubeconfig "$kubeconfig" apply --server-side --force-conflicts -f crds/ >/dev/null
"$kubectl" --kubeconfig "$kubeconfig" wait --for=condition=Established --timeout=60s crd --all >/dev/null
KUBECONFIG=$kubeconfig RUST_LOG=info,kube=warn target/debug/gangplank controller \
  --log-format=json --leader-elect=false --gang-scheduler=kubernetes \
  --kinds=PyTorchJob,TFJob,JAXJob,XGBoostJob,PaddleJob,MPIJob \
  --pytorch-init-image=localhost/realnode/busybox:1.35 >"$work/controller.log" 2>&1 &
controller=$!
python3 - "$kubeconfig" "$kubectl" "${ROUNDS:-1}" <<'PY'
import json, subprocess, sys, time
KC = sys.argv[1]; KUBECTL = sys.argv[2]; ROUNDS = int(sys.argv[3])
IMG = "localhost/gangplank-test/allreduce:1"
def k(*a, inp=None):
    return subprocess.run([KUBECTL, "--kubeconfig", KC, *a], input=inp, capture_output=True, text=True)
def rep(n, c, restart="OnFailure", args=()):
    return {"replicas": n, "restartPolicy": restart, "template": {"spec": {"containers": [
        {"name": c, "image": IMG, "imagePullPolicy": "Never", "command": ["/allreduce"], "args": list(args)}],
        "terminationGracePeriodSeconds": 1}}}
def jobs(n):
    yield "PyTorchJob", f"Master + {n-1} Worker(s)", "kubeflow.org/v1", {"pytorchReplicaSpecs": {"Master": rep(1, "pytorch"), "Worker": rep(n-1, "pytorch")}}
    yield "PyTorchJob", f"elastic, {n} Workers", "kubeflow.org/v1", {"elasticPolicy": {"minReplicas": n, "maxReplicas": n, "rdzvBackend": "c10d"}, "pytorchReplicaSpecs": {"Worker": rep(n, "pytorch")}}
    yield "TFJob", f"Chief + {n-1} Worker(s)", "kubeflow.org/v1", {"tfReplicaSpecs": {"Chief": rep(1, "tensorflow"), "Worker": rep(n-1, "tensorflow")}}
    yield "JAXJob", f"{n} Workers", "kubeflow.org/v1", {"jaxReplicaSpecs": {"Worker": rep(n, "jax")}}
    yield "XGBoostJob", f"Master + {n-1} Worker(s)", "kubeflow.org/v1", {"xgbReplicaSpecs": {"Master": rep(1, "xgboost"), "Worker": rep(n-1, "xgboost")}}
    yield "PaddleJob", f"{n} Workers", "kubeflow.org/v1", {"paddleReplicaSpecs": {"Worker": rep(n, "paddle")}}
    yield "MPIJob", f"Launcher + {n} Workers", "kubeflow.org/v2beta1", {"slotsPerWorker": 1, "mpiReplicaSpecs": {"Launcher": rep(1, "mpi", "OnFailure", ["mpi-launcher", "7070"]), "Worker": rep(n, "mpi", "Never", ["mpi-worker", "7070"])}}
i = 0
for r in range(ROUNDS):
    for n in (2, 4):
        for kind, shape, api, spec in jobs(n):
            i += 1; ns = f"m{i}"
            spec = dict(spec); spec["runPolicy"] = {"cleanPodPolicy": "None", "backoffLimit": 0}
            job = {"apiVersion": api, "kind": kind, "metadata": {"name": "ar", "namespace": ns}, "spec": spec}
            k("create", "namespace", ns)
            t0 = time.monotonic()
            out = k("apply", "-f", "-", inp=json.dumps(job))
            if out.returncode: print("apply failed", out.stderr); continue
            while True:
                st = k("-n", ns, "get", kind.lower(), "ar", "-o", "jsonpath={.status.conditions[?(@.status==\"True\")].type}").stdout
                if "Succeeded" in st or "Failed" in st or time.monotonic() - t0 > 120: break
                time.sleep(0.25)
            print(f"{kind} {shape} n={n}: {st.split()[-1] if st else 'none'} in {time.monotonic()-t0:.1f} s", flush=True)
            k("delete", "namespace", ns, "--wait=false")
PY
