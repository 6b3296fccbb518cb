#!/usr/bin/env bash
# What each shipped `applies_when` annotation saves: instructions per review (callgrind) of
# each JOB with the index off, against the same with that one policy disabled in
# params.yaml. On a job the policy cannot apply to, the difference is what evaluating it
# anyway costs: what the index saves by skipping it. Figures in policies/README.md
# "Performance". Usage: benches/annotations.sh [JOB...]
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/review_instructions.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GANGPLANK_INDEX=off
# Instructions of 5 reviews, start-up left out (collection only inside decide::review).
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null --toggle-collect='*decide::review*' \
    "$bin" "$1" 5 "$2" 2>&1 | awk '/Collected/ {print $4}'
}
annotated=$(grep -l '^#   applies_when:' policies/*.rego | xargs -n1 basename | sed 's/\.rego$//')
for job in "${jobs[@]}"; do
  base=$(count "$job" policies)
  echo "$job: $((base / 5)) instructions per review, index off"
  for p in $annotated; do
    rm -rf "$work/p" && cp -r policies "$work/p"
    printf '\n  %s:\n    enabled: false\n' "$p" >>"$work/p/params.yaml"
    n=$(count "$job" "$work/p")
    echo "  $p: $(((base - n) / 5)) saved per review when skipped"
  done
done
