#!/usr/bin/env bash
# Memory across policy reloads under load (issue 12, RELIABILITY.md): does a reload keep the
# previous policy set's memory?
#
# `gangplank serve` with a copy of policies/ and --reload-interval 1s, loaded by
# `gangplank bench` (the full mix, paced, every answer checked). Every INTERVAL seconds a
# comment line is appended to one policy file, so the server compiles and swaps in a new set;
# the server's RSS is printed after each reload. A set kept alive by something would show as
# growth by about one set per reload; allocator caching shows as a step that stops growing.
#
# Usage: benches/reloads.sh   (after cargo build --release; RELOADS, INTERVAL, RATE to change)
set -euo pipefail
cd "$(dirname "$0")/.."
gangplank=${GANGPLANK:-./target/release/gangplank}
reloads=${RELOADS:-30}
interval=${INTERVAL:-4}
rate=${RATE:-1000}
work=$(mktemp -d)
server_pid=""
bench_pid=""
cleanup() {
  [ -n "$bench_pid" ] && kill "$bench_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cp -r policies "$work/policies"
"$gangplank" serve --addr "127.0.0.1:$port" --ephemeral-ca "$work/ca.crt" \
  --policies "$work/policies" --reload-interval 1s 2> "$work/serve.log" &
server_pid=$!
for _ in $(seq 300); do
  [ -f "$work/ca.crt" ] && curl -fs --cacert "$work/ca.crt" "https://127.0.0.1:$port/readyz" >/dev/null && break
  sleep 0.1
done
rss() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$server_pid/status"; }
generation() { grep -c 'policies reloaded' "$work/serve.log" || true; }

duration=$(( (reloads + 2) * interval + 5 ))
"$gangplank" bench --addr "127.0.0.1:$port" --ca "$work/ca.crt" --server-pid "$server_pid" \
  --concurrency 8 --rate "$rate" --warmup 2s --duration "${duration}s" --report-every 10s \
  > "$work/bench.txt" 2>&1 &
bench_pid=$!
sleep $(( interval + 2 ))
echo "reload  server RSS MiB  reloads logged"
echo "     0  $(rss)  $(generation)"
for i in $(seq "$reloads"); do
  echo "# reload $i" >> "$work/policies/images.rego"
  sleep "$interval"
  echo "$(printf '%6d' "$i")  $(rss)  $(generation)"
done
status=0
wait "$bench_pid" || status=$?
bench_pid=""
cat "$work/bench.txt"
echo "bench exit status: $status"
exit "$status"
