#!/usr/bin/env bash
# Faults under load (issue 12, RELIABILITY.md): `gangplank serve` with its certificate in a
# Secret-volume layout and its policies in a directory, loaded by `gangplank bench` (the full
# review mix, paced, every answer checked) while this script
#
#   1. rotates the certificate (the `..data` symlink swap a Secret update makes),
#   2. pushes a broken policy (a syntax error), then a good new one,
#   3. sends SIGTERM, and polls /readyz and the process until it exits.
#
# Faults 1 and 2 happen in one bench run that must end with 0 errors. For 3 the bench runs
# past the end of the shutdown delay: the errors it counts after that must all be
# connections refused (nothing listening any more), none a request sent and not answered.
#
# Usage: benches/faults.sh   (after cargo build --release; RATE, CONCURRENCY to change load)
set -euo pipefail
cd "$(dirname "$0")/.."
gangplank=${GANGPLANK:-./target/release/gangplank}
rate=${RATE:-1000}
concurrency=${CONCURRENCY:-8}
work=$(mktemp -d)
server_pid=""
bench_pid=""
cleanup() {
  [ -n "$bench_pid" ] && kill "$bench_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

log() { echo "[$(date -u +%H:%M:%S.%3N)] $*"; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url="https://127.0.0.1:$port"

# Two certificate pairs from two CAs; the client trusts both (a CA bundle during rotation).
"$gangplank" certs --out "$work/a" --dns 127.0.0.1 >/dev/null
"$gangplank" certs --out "$work/b" --dns 127.0.0.1 >/dev/null
cat "$work/a/ca.crt" "$work/b/ca.crt" > "$work/ca-both.crt"
# Secret-volume layout: tls.crt -> ..data/tls.crt, ..data -> ..a (then ..b).
mkdir -p "$work/tls/..a" "$work/tls/..b"
cp "$work/a/tls.crt" "$work/a/tls.key" "$work/tls/..a/"
cp "$work/b/tls.crt" "$work/b/tls.key" "$work/tls/..b/"
ln -s ..a "$work/tls/..data"
ln -s ..data/tls.crt "$work/tls/tls.crt"
ln -s ..data/tls.key "$work/tls/tls.key"
cp -r policies "$work/policies"

"$gangplank" serve --addr "127.0.0.1:$port" --tls-cert "$work/tls/tls.crt" \
  --tls-key "$work/tls/tls.key" --policies "$work/policies" --reload-interval 1s \
  --shutdown-delay 5s 2> "$work/serve.log" &
server_pid=$!
for _ in $(seq 300); do curl -fs --cacert "$work/a/ca.crt" "$url/readyz" >/dev/null && break; sleep 0.1; done
log "server pid $server_pid on $url"

bench() { # duration -> runs the bench in the background, output in $work/bench.txt
  "$gangplank" bench --addr "127.0.0.1:$port" --ca "$work/ca-both.crt" --server-pid "$server_pid" \
    --concurrency "$concurrency" --rate "$rate" --warmup 1s --duration "$1" --report-every 5s \
    > "$work/bench.txt" 2>&1 &
  bench_pid=$!
}

# A review of a job that no shipped policy refuses by name, sent to /validate.
probe_review() {
  python3 - "$1" <<'PY'
import json, sys
job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
       "metadata": {"name": sys.argv[1], "namespace": "default"},
       "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {
           "containers": [{"name": "pytorch", "image": "busybox@sha256:" + "0" * 64}]}}}}}}
print(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {"uid": "probe", "operation": "CREATE", "namespace": "default",
                "name": sys.argv[1], "userInfo": {"username": "probe"}, "object": job}}))
PY
}
denied_by_new_policy() {
  probe_review "faults-probe" | curl -fsS --cacert "$work/ca-both.crt" -H 'content-type: application/json' \
    --data-binary @- "$url/validate" | grep -q 'faults-canary'
}
wait_for() { # what, deadline seconds, command...
  local what=$1 deadline=$2 start=$SECONDS; shift 2
  until "$@"; do
    if (( SECONDS - start > deadline )); then log "FAILED: $what not within ${deadline}s"; return 1; fi
    sleep 0.1
  done
  log "$what (after $((SECONDS - start))s)"
}

echo "== faults 1 and 2: certificate rotation, broken policy push, good policy push; bench 60 s at $rate reviews/s"
bench 60s
sleep 16
log "rotating the certificate: ..data -> ..b"
ln -s ..b "$work/tls/..data.new" && mv -T "$work/tls/..data.new" "$work/tls/..data"
wait_for "new handshakes get the new certificate" 30 \
  curl -fs --cacert "$work/b/ca.crt" "$url/healthz" -o /dev/null
sleep 10
log "pushing a broken policy (syntax error)"
printf 'package gangplank.policies.broken\n\nimport rego.v1\n\nviolation contains x if {\n' > "$work/policies/broken.rego"
wait_for "/readyz reports the refused edit, still ready" 30 \
  sh -c "curl -fsS --cacert '$work/ca-both.crt' '$url/readyz' | grep -q broken.rego"
sleep 10
log "pushing a good new policy (denies jobs named faults-*) and removing the broken one"
cat > "$work/policies/canary.rego" <<'REGO'
package gangplank.policies.canary

import rego.v1

meta := {"title": "faults canary", "description": "faults.sh: denies jobs named faults-*", "action": "deny"}

violation contains {"path": "/metadata/name", "msg": "faults-canary: this name is refused"} if {
	startswith(input.object.metadata.name, "faults-")
}
REGO
rm "$work/policies/broken.rego"
wait_for "the new policy is served" 30 denied_by_new_policy
wait "$bench_pid" || true
bench_pid=""
cat "$work/bench.txt"

echo "== fault 3: SIGTERM under load (shutdown delay 5 s); bench 20 s at $rate reviews/s"
bench 20s
sleep 8
log "SIGTERM to $server_pid"
kill -TERM "$server_pid"
term=$SECONDS
wait_for "/readyz answers 503" 5 \
  sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --cacert '$work/ca-both.crt' '$url/readyz')\" = 503 ]"
status=0
wait "$server_pid" || status=$?
log "server exited with status $status, $((SECONDS - term)) s after SIGTERM"
server_pid=""
wait "$bench_pid" || true
bench_pid=""
cat "$work/bench.txt"
echo "== server log (warnings and the shutdown)"
grep -E 'WARN|ERROR|shutting|shutdown|refused|reload' "$work/serve.log" | cut -c1-300 | tail -n 20 || true
