#!/usr/bin/env bash
# Instructions per mutate+validate review of each JOB (default: the admission bench's jobs),
# counted by callgrind: stable whatever else runs on the machine. See
# benches/review_instructions.rs; figures in BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/review_instructions.sh
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$@" 2>&1 |
    awk '/Collected/ {print $4}'
}
# One review (mutation, then validation of the result: what `check` runs and what /validate
# runs when /mutate did not hand the object over), and one admission as the webhooks serve it
# (/mutate's patch, then /validate of the object it produced with the validation policies).
for job in "${jobs[@]}"; do
  a=$(count "$job" 10)
  b=$(count "$job" 30)
  echo "$job: $(( (b - a) / 20 )) instructions per review"
  a=$(count "$job" 10 policies --admission)
  b=$(count "$job" 30 policies --admission)
  echo "$job: $(( (b - a) / 20 )) instructions per admission (/mutate + /validate handed over)"
  a=$(count "$job" 10 policies --admission-missed)
  b=$(count "$job" 30 policies --admission-missed)
  echo "$job: $(( (b - a) / 20 )) instructions per admission (/mutate + /validate in full: a hand-off miss)"
done
