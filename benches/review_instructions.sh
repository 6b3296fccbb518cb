# Sourced by benches/instructions.sh and benches/annotations.sh (after `cd` to the repo and
# with the script's arguments): builds the review_instructions bench and sets `bin` to it and
# `jobs` to the JOB arguments, by default the admission bench's two jobs.
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cargo build --release -q --bench review_instructions
bin=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/review_instructions-* | grep -v '\.d$' | head -1)
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=(benches/data/pytorchjob-9.yaml benches/data/pytorchjob-9-platform.yaml)
