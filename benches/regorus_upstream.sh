#!/usr/bin/env bash
# What two small changes to regorus 0.14.1's VM would save per review (issue 11: "if regorus
# itself sets the floor, write down what upstream change would remove it"). Nothing here is
# part of gangplank's build: the script copies regorus from the cargo registry into a temp
# dir, changes the copy, builds a copy of this tree against it with `[patch.crates-io]`, and
# counts instructions per mutate+validate review with callgrind, before and after.
#
#   change 1  VmError values are built only on the error path: `.ok_or(VmError::…)` builds
#             (and drops) the error on every register read, rule call and loop step;
#             `.ok_or_else(|| VmError::…)` builds it only when the value is missing.
#   change 2  a rule call borrows its RuleInfo through a handle on the program instead of
#             cloning it (definitions, destructuring blocks, else flags: several Vecs) on
#             every call, cached hits included.
#
# Neither changes what a policy computes: the same 444 policy cases are expected to pass
# (run `cargo test --test policy_suites` in the printed tree to check).
#
# Usage: benches/regorus_upstream.sh   (needs valgrind; ~10 min, a cold release build)
#        KEEP=1 keeps the temp dir (patched regorus and tree) and prints its path.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cargo fetch -q
src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/regorus-0.14.1 2>/dev/null | head -1)
[ -n "$src" ] || { echo "regorus 0.14.1 is not in the cargo registry cache" >&2; exit 2; }
work=$(mktemp -d)
if [ -z "${KEEP:-}" ]; then trap 'rm -rf "$work"' EXIT; else echo "# work dir: $work"; fi

cp -r "$src" "$work/regorus"
python3 - "$work/regorus" <<'PY'
import glob, re, sys
root = sys.argv[1]

# Change 1: errors built lazily.
changed = 0
for path in glob.glob(f"{root}/src/rvm/vm/*.rs"):
    text = open(path).read()
    new, n = re.subn(r"\.ok_or\((\s*)VmError::", r".ok_or_else(|| \1VmError::", text)
    changed += n
    open(path, "w").write(new)
assert changed >= 40, f"change 1 matched {changed} calls: not the regorus 0.14.1 source"

# Change 2: the run-to-completion rule call borrows its RuleInfo.
path = f"{root}/src/rvm/vm/rules.rs"
text = open(path).read()
start = text.index("    pub(super) fn execute_call_rule_common(")
end = text.index("    pub(super) fn execute_call_rule(&mut self")
body = text[start:end]
for old, new in [
    ("let rule_info = self\n            .program\n            .rule_infos",
     "let program = Arc::clone(&self.program);\n        let rule_info = program\n            .rule_infos"),
    ("available: self.program.rule_infos.len(),\n            })?\n            .clone();",
     "available: program.rule_infos.len(),\n            })?;"),
    ("let rule_definitions = rule_info.definitions.clone();",
     "let rule_definitions = &rule_info.definitions;"),
    (".execute_rule_definitions_common(&rule_definitions, &rule_info, function_call_params)?;",
     ".execute_rule_definitions_common(rule_definitions, rule_info, function_call_params)?;"),
]:
    assert body.count(old) == 1, f"change 2: {old!r} not found once"
    body = body.replace(old, new)
text = text[:start] + body + text[end:]
text = text.replace("use alloc::vec::Vec;\n", "use alloc::sync::Arc;\nuse alloc::vec::Vec;\n", 1)
open(path, "w").write(text)
PY

mkdir "$work/gangplank"
git archive HEAD | tar -x -C "$work/gangplank"
printf '\n[patch.crates-io]\nregorus = { path = "%s/regorus" }\n' "$work" >>"$work/gangplank/Cargo.toml"

echo "# regorus 0.14.1 as published (benches/instructions.sh):"
benches/instructions.sh
echo "# with both changes:"
(cd "$work/gangplank" && CARGO_TARGET_DIR="$work/target" benches/instructions.sh)
