#!/usr/bin/env bash
# Memory under concurrent large bodies (issue 32, RELIABILITY.md 7.5): CLIENTS clients post a
# valid AdmissionReview of ~15 MiB each (a PyTorchJob with one large annotation) to
# `gangplank serve` at once: HTTP/1.1 with Content-Length (most) and chunked HTTP/1.1
# (CHUNKED of them) with curl, HTTP/2 (H2 of them) with nghttp (Debian's nghttp2-client; it
# does not verify the certificate, and its answers' status is not checked, their uid is).
# curl 7.88's HTTP/2 upload spins without reading the answer once the server has kept its
# window full for a while (the budget's wait), so it cannot be the HTTP/2 client here. The server runs with deploy/'s environment; its
# peak RSS (VmHWM) is read once every answer is in, and every answer is checked: an
# AdmissionReview with the request's uid, judged, or refused with 429 (no room) or 413.
# A new server per run (RUNS of them), so that each peak is that run's.
#
# Usage: benches/hostile_bodies.sh   (after cargo build --release)
#   GANGPLANK=path/to/gangplank CLIENTS=96 CHUNKED=16 H2=16 RUNS=3 MIB=15
set -euo pipefail
cd "$(dirname "$0")/.."
gangplank=${GANGPLANK:-./target/release/gangplank}
clients=${CLIENTS:-96}
chunked=${CHUNKED:-16}
h2=${H2:-16}
runs=${RUNS:-3}
mib=${MIB:-15}
work=$(mktemp -d -p "${TMPDIR_BODIES:-/dev/shm}")
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# One review per client (its own uid), written once for all runs.
python3 - "$work" "$clients" "$mib" <<'PY'
import json, sys
work, clients, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
container = {"name": "pytorch", "image": "ghcr.io/example/train@sha256:" + "a" * 64,
             "command": ["torchrun", "train.py"],
             "resources": {"limits": {"nvidia.com/gpu": 8}}}
replica = lambda n: {"replicas": n, "restartPolicy": "OnFailure",
                     "template": {"spec": {"containers": [container]}}}
job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
       "metadata": {"name": "hostile", "namespace": "team",
                    "annotations": {"example.com/blob": "x" * (mib * 1024 * 1024)}},
       "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)}}}
gvk = {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"}
for i in range(clients):
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": f"hostile-{i:03}", "kind": gvk, "requestKind": gvk,
                          "resource": {"group": "kubeflow.org", "version": "v1",
                                       "resource": "pytorchjobs"},
                          "name": "hostile", "namespace": "team", "operation": "CREATE",
                          "userInfo": {"username": "mallory"}, "object": job,
                          "oldObject": None, "dryRun": False}}
    with open(f"{work}/review-{i:03}.json", "w") as f:
        json.dump(review, f)
PY
bytes=$(stat -c %s "$work/review-000.json")
echo "# $clients clients x $bytes bytes: $((clients - chunked - h2)) HTTP/1.1 with Content-Length, $chunked chunked, $h2 HTTP/2; $("$gangplank" --version 2>/dev/null || echo gangplank)"
echo "# run  judged  429  413  wrong  peak-RSS-MiB  seconds"

for run in $(seq "$runs"); do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  MIMALLOC_ARENA_EAGER_COMMIT=0 MIMALLOC_ALLOW_THP=0 "$gangplank" serve \
    --addr "127.0.0.1:$port" --ephemeral-ca "$work/ca.crt" --cluster-inventory=false \
    2> "$work/serve-$run.log" &
  server_pid=$!
  for _ in $(seq 300); do
    curl -fs --cacert "$work/ca.crt" "https://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  start=$(date +%s.%N)
  pids=()
  for i in $(seq 0 $((clients - 1))); do
    n=$(printf %03d "$i")
    if [ "$i" -lt "$h2" ]; then
      { nghttp -d "$work/review-$n.json" -H 'content-type: application/json' \
          "https://127.0.0.1:$port/mutate" > "$work/answer-$n.json" 2> "$work/error-$n" \
          && echo 200 || echo 000; } > "$work/status-$n" &
      pids+=($!)
      continue
    fi
    flags=(--http1.1)
    [ "$i" -lt $((h2 + chunked)) ] && flags=(--http1.1 -H "Transfer-Encoding: chunked")
    curl -sS --cacert "$work/ca.crt" "${flags[@]}" -H "Content-Type: application/json" \
      --data-binary "@$work/review-$n.json" -o "$work/answer-$n.json" -w '%{http_code}' \
      "https://127.0.0.1:$port/mutate" > "$work/status-$n" 2> "$work/error-$n" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  end=$(date +%s.%N)
  peak=$(awk '/^VmHWM:/ {printf "%.1f", $2 / 1024}' "/proc/$server_pid/status")
  summary=$(python3 - "$work" "$clients" <<'PY'
import json, sys
work, clients = sys.argv[1], int(sys.argv[2])
judged = busy = large = 0
wrong = []
for i in range(clients):
    uid = f"hostile-{i:03}"
    status = open(f"{work}/status-{i:03}").read().strip()
    try:
        response = json.load(open(f"{work}/answer-{i:03}.json"))["response"]
    except Exception as e:
        error = open(f"{work}/error-{i:03}").read().strip()
        wrong.append(f"{uid}: HTTP {status}, not a review: {error or e}")
        continue
    code = (response.get("status") or {}).get("code")
    if status != "200" or response.get("uid") != uid:
        wrong.append(f"{uid}: HTTP {status}, uid {response.get('uid')}")
    elif code == 429:
        busy += 1
    elif code == 413:
        large += 1
    else:
        judged += 1
print(judged, busy, large, len(wrong))
for w in wrong[:3]:
    print("#  " + w, file=sys.stderr)
PY
)
  printf '  %s    %s\n' "$run" "$(echo "$summary" | awk -v p="$peak" -v s="$(echo "$end - $start" | bc)" '{printf "%6s %4s %4s %6s %12s %8.1f", $1, $2, $3, $4, p, s}')"
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true
  server_pid=""
  rm -f "$work"/answer-* "$work"/status-* "$work"/error-*
done
