#!/usr/bin/env bash
# A newcomer's first hour, timed (issue 25): a fresh clone of this repository's HEAD (or REV)
# in a temporary directory, the crates already downloaded, then the README's two set-up
# commands one after the other:
#
#   1. the server command, until it prints `svc: listening on` (then it is stopped),
#   2. the test command, to its end.
#
# Prints the seconds from the first command to "listening" and to the tests' end, how many
# dependency crates each command compiled and which the second compiled again (a shared
# profile with unified features compiles none again: one full build), the tests' summary,
# and the load average before and after (the machine may be shared: repeat when it was busy).
#
#   bash benches/first_hour.sh                      # the README's commands at HEAD
#   REV=abc123 SERVER_CMD='cargo run --release -- server start --dev --listen 127.0.0.1:0' \
#     TEST_CMD='cargo test' bash benches/first_hour.sh   # another revision, other commands
#
# SERVER_CMD must leave `--state-dir` to the script (it appends one under the clone).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
REV=${REV:-HEAD}
SERVER_CMD=${SERVER_CMD:-cargo run -- server start --dev --listen 127.0.0.1:0}
TEST_CMD=${TEST_CMD:-cargo test}
work=${WORK:-$(mktemp -d /tmp/first-hour.XXXXXX)}
keep=${KEEP:-0}
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT

git clone -q "$repo" "$work/svc"
git -C "$work/svc" checkout -q "$REV"
cd "$work/svc"
echo "revision: $(git rev-parse --short HEAD)   clone: $work/svc"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# CPU seconds (user + system) of every finished child of this shell: the compilers' time,
# which a busy machine stretches much less than the wall time.
# (`times` must run in this shell, not in a pipeline's subshell, whose children are none.)
cpu() {
  times >"$work/times"
  tail -1 "$work/times" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); n += p[1] * 60 + p[2] } printf "%.0f", n }'
}

t0=$(date +%s.%N)
# shellcheck disable=SC2086
$SERVER_CMD --state-dir "$work/state" >"$work/server.out" 2>"$work/server.err" &
server=$!
until grep -q '^svc: listening on' "$work/server.out" 2>/dev/null; do
  if ! kill -0 "$server" 2>/dev/null; then
    echo "the server command ended before listening:" >&2
    tail -20 "$work/server.err" >&2
    exit 1
  fi
  sleep 0.2
done
t1=$(date +%s.%N)
kill "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true
c1=$(cpu)

status=0
# shellcheck disable=SC2086
$TEST_CMD >"$work/test.out" 2>"$work/test.err" || status=$?
t2=$(date +%s.%N)
c2=$(cpu)

# The crates (name and version) each command compiled, svc itself left out.
crates() { sed -n 's/^ *Compiling \([^ ]*\) \(v[^ ]*\).*/\1 \2/p' "$1" | grep -v '^svc ' | sort -u; }
crates "$work/server.err" >"$work/server.crates"
crates "$work/test.err" >"$work/test.crates"
passed=$(grep -o '[0-9]* passed' "$work/test.out" | awk '{s+=$1} END {print s+0}')
failed=$(grep -o '[0-9]* failed' "$work/test.out" | awk '{s+=$1} END {print s+0}')
ignored=$(grep -o '[0-9]* ignored' "$work/test.out" | awk '{s+=$1} END {print s+0}')
echo "server command: $SERVER_CMD"
echo "test command:   $TEST_CMD (exit $status)"
awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN {
  printf "to \"listening\":   %4.0f s (%d min %02d s)\n", b - a, (b - a) / 60, (b - a) % 60
  printf "to the tests end: %4.0f s (%d min %02d s)\n", c - a, (c - a) / 60, (c - a) % 60 }'
echo "CPU time (user + system): $c1 s for the server command, $((c2 - c1)) s for the test command"
echo "dependencies compiled: $(wc -l <"$work/server.crates") crates by the server command, $(wc -l <"$work/test.crates") by the test command, $(comm -12 "$work/server.crates" "$work/test.crates" | wc -l) of them again:"
comm -12 "$work/server.crates" "$work/test.crates" | tr '\n' ' ' | fold -s -w 96 | sed 's/^/  /'
echo
echo "tests: $passed passed, $failed failed, $ignored ignored"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$status" = 0 ] || { grep -E '^(test .* FAILED|failures:)' "$work/test.out" | head -20; }
