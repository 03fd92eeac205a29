#!/usr/bin/env bash
# One fuzzing campaign that accumulates:
#
#   fuzz/run.sh TARGET MINUTES        e.g. fuzz/run.sh parse_dot 30
#
# Runs the libFuzzer target TARGET (one core) for MINUTES starting from the committed corpus
# fuzz/corpus/TARGET, with the target's dictionary; merges the inputs that found new coverage
# back into fuzz/corpus/TARGET (commit it, so the next campaign, on any machine, starts where
# this one stopped); and appends a row (date, minutes, execs, execs/s, coverage, corpus size,
# crashes) to fuzz/RESULTS.md, printing the target's running total of executions.
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Environment:
#   FUZZ_SANITIZER  none (default: safe Rust, ~2x faster) or address
#   FUZZ_MAX_LEN    largest input in bytes (default 40000 for DOT targets, 4096 otherwise)
# A crash stops the campaign: the input is kept under fuzz/artifacts/TARGET/ and the row
# says so; fix it, add a regression test, and run again. Exit status: 0 clean, 1 crash,
# 2 usage or tool error.
set -uo pipefail
cd "$(dirname "$0")/.."

target=${1:-}; minutes=${2:-}
case "$target" in
  parse_dot|load_dot) dict=fuzz/dot.dict; max_len=${FUZZ_MAX_LEN:-40000} ;;
  parse_condition|eval_condition) dict=fuzz/condition.dict; max_len=${FUZZ_MAX_LEN:-4096} ;;
  parse_stylesheet) dict=fuzz/stylesheet.dict; max_len=${FUZZ_MAX_LEN:-4096} ;;
  *) echo "usage: fuzz/run.sh parse_dot|load_dot|parse_condition|eval_condition|parse_stylesheet MINUTES" >&2; exit 2 ;;
esac
[[ "$minutes" =~ ^[0-9]+$ ]] && [ "$minutes" -gt 0 ] || { echo "MINUTES must be a positive integer" >&2; exit 2; }
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2; exit 2; }
sanitizer=${FUZZ_SANITIZER:-none}

corpus=fuzz/corpus/$target
[ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ] || python3 fuzz/seed.py >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -a "$corpus/." "$work/"
log=fuzz/artifacts/$target.log
mkdir -p "fuzz/artifacts/$target"

( cd fuzz && cargo +nightly fuzz build -s "$sanitizer" -O "$target" ) || exit 2
bin=fuzz/target/x86_64-unknown-linux-gnu/release/$target
started=$(date -u +%Y-%m-%dT%H:%MZ)
"$bin" "$work" -dict="$dict" -max_len="$max_len" -max_total_time=$((minutes * 60)) \
  -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$target/" >"$log" 2>&1
status=$?

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
crashes=0; crash_note=""
if [ $status -ne 0 ]; then
  crashes=1
  crash_note=$(grep -oE "fuzz/artifacts/$target/[a-z-]+[0-9a-f]+" "$log" | tail -1)
  [ -n "$crash_note" ] || crash_note="exit $status, see $log"
fi

# Keep only what adds coverage: merge the campaign's inputs into the committed corpus.
"$bin" -merge=1 -dict="$dict" -max_len="$max_len" "$corpus" "$work" >>"$log" 2>&1
size=$(ls "$corpus" | wc -l)

results=fuzz/RESULTS.md
row="| $started | \`$target\` | $minutes | ${execs:-?} | ${rate:-?} | ${cov:-?} | $size | $crashes${crash_note:+ ($crash_note)} | $sanitizer |"
echo "$row" >> "$results"
total=$(awk -F'|' -v t="\`$target\`" '$3 ~ t { gsub(/ /, "", $5); if ($5 ~ /^[0-9]+$/) s += $5 } END { print s + 0 }' "$results")
echo "$row"
echo "$target: $total executions over all recorded campaigns (fuzz/RESULTS.md)"
[ $crashes -eq 0 ] || { echo "crash: $crash_note" >&2; exit 1; }
