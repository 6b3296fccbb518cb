#!/usr/bin/env bash
# Two gangplank builds over HTTPS, alternately in one sitting (A, B, A, B...): the same
# `gangplank bench --baseline examples/configmap.yaml` (every example plus the platform job;
# the ConfigMap mix after each level is the server's plumbing alone) run by each build's own
# binary against the server it spawns, from its own tree (its policies, examples and jobs),
# so both see the same machine state in turn.
# Usage: benches/https_ab.sh A_TREE/target/release/gangplank B_TREE/... [ROUNDS] [-- bench args]
# Figures in BENCHMARKS.md "Evaluating only what applies, once".
set -euo pipefail
cd "$(dirname "$0")/.."
a=$1 b=$2 rounds=${3:-2}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
export MIMALLOC_ARENA_EAGER_COMMIT=0 # as deploy/deployment.yaml and the Dockerfile set it
for round in $(seq "$rounds"); do
  for side in A B; do
    bin=$a; [ "$side" = B ] && bin=$b
    bin=$(realpath "$bin")
    tree=$(cd "$(dirname "$bin")/../.." && pwd)
    echo "== round $round, $side: $bin ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
    (cd "$tree" && "$bin" bench --baseline examples/configmap.yaml "$@")
  done
done
