#!/usr/bin/env bash
# How the cost of a review grows with what a job holds (issue 11: at most linearly with
# containers and env entries, not at all with the pod count). Variants of the platform job
# (benches/data/pytorchjob-9-platform.yaml: 2 replica types, each 2 containers + 1 init
# container, 30 env entries in the main container) are written to a temp dir and counted by
# benches/instructions.sh (callgrind instructions per review: exact on a shared machine).
#
#   env ×N         the main container of each replica type has 30·N env entries
#   sidecars +N    N more sidecar containers per replica type (copies of the log shipper)
#   workers N      N Worker replicas (the policies must not iterate pods)
#
# Usage: benches/scaling.sh   (needs valgrind and python3 with PyYAML)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'PY'
import copy, sys, yaml
out = sys.argv[1]
base = yaml.safe_load(open("benches/data/pytorchjob-9-platform.yaml"))

def variant(name, change):
    job = copy.deepcopy(base)
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        change(replica)
    with open(f"{out}/{name}.yaml", "w") as f:
        yaml.safe_dump(job, f)

def env_times(n):
    def change(replica):
        main = replica["template"]["spec"]["containers"][0]
        env = main["env"]
        main["env"] = [dict(e, name=f"{e['name']}_{i}" if i else e["name"]) for i in range(n) for e in env]
    return change

def sidecars(n):
    def change(replica):
        containers = replica["template"]["spec"]["containers"]
        shipper = containers[1]
        containers += [dict(copy.deepcopy(shipper), name=f"{shipper['name']}-{i}") for i in range(n)]
    return change

def workers(n):
    def change(replica):
        if replica["replicas"] != 1:
            replica["replicas"] = n
    return change

for n in (1, 2, 4, 8):
    variant(f"env-x{n}", env_times(n))
for n in (2, 6):
    variant(f"sidecars-plus{n}", sidecars(n))
for n in (63, 511):
    variant(f"workers-{n}", workers(n))
PY
benches/instructions.sh "$work"/env-x1.yaml "$work"/env-x2.yaml "$work"/env-x4.yaml \
  "$work"/env-x8.yaml "$work"/sidecars-plus2.yaml "$work"/sidecars-plus6.yaml \
  "$work"/workers-63.yaml "$work"/workers-511.yaml | sed "s|$work/||"
