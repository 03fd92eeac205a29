#!/usr/bin/env bash
# Whole-process comparison, one sitting: `svc validate bigN.dot` (release build) against
#   gvpr 'BEG_G{printf("%d %d\n",nNodes($G),nEdges($G))}' bigN.dot
# on gen_big.py workflows, the two tools alternating. Prints, per tool and size, the median
# wall time of RUNS runs (default 7) and the largest max RSS of those runs, the svc/gvpr
# ratios, and the time ratio between sizes (x10.0 for a 10x larger file means linear).
#
#   bash benches/validate_vs_gvpr.sh            # sizes 1000 10000 100000
#   RUNS=9 bash benches/validate_vs_gvpr.sh 10000 100000
#
# Needs python3, graphviz (gvpr) and GNU time (/usr/bin/time; Debian package `time`).
#
# Latest figures (issue 16, session 10, RUNS=9, a slower machine than session 7's, two runs):
#   10,000 nodes: 0.46x and 0.44x wall, 0.91-0.93x RSS; 100,000 nodes: 0.46x and 0.48x wall, 0.67x RSS
#   (session 9, same machine class, before the session-10 parser changes: 0.66x / 0.51x).
# Session 7 (RUNS=9, load average 0.7-1.0 on 2 cores; README "Benchmarks"):
#   10,000 nodes: svc 0.048 s / 10 MiB vs gvpr 0.104 s / 12 MiB: 0.46x wall, 0.90x RSS
#  100,000 nodes: svc 0.509 s / 67 MiB vs gvpr 1.224 s / 101 MiB: 0.42x wall, 0.66x RSS
# (session 6: 0.56x / 0.96x and 0.52x / 0.67x; session 5: 0.59x / 1.33x and 0.49x / 0.99x).
# Wall times include starting /usr/bin/time for both tools, which pulls the ratio towards 1.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-7}
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(1000 10000 100000)
GEN=benches/gen_big.py
PROG='BEG_G{printf("%d %d\n",nNodes($G),nEdges($G))}'

for tool in python3 gvpr /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y graphviz time)" >&2; exit 2; }
done

cargo build --release --quiet
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
SVC="$target_dir/release/svc"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run_once TAG CMD...: one run under GNU time; appends "wall_us maxrss_kib user_s sys_s".
run_once() {
  local tag=$1; shift
  local s e
  s=$(date +%s%N)
  /usr/bin/time -f '%M %U %S' -o "$work/rss" "$@" > /dev/null 2>&1 || true
  e=$(date +%s%N)
  echo "$(( (e - s) / 1000 )) $(tail -1 "$work/rss")" >> "$work/$tag"
}

# summary TAG: "median_wall_s maxrss_kib min_s max_s median_cpu_s"
summary() {
  python3 - "$work/$1" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
t = [int(r[0]) / 1e6 for r in rows]
m = [int(r[1]) for r in rows]
cpu = [float(r[2]) + float(r[3]) for r in rows]
print(f"{statistics.median(t):.3f} {max(m)} {min(t):.3f} {max(t):.3f} {statistics.median(cpu):.2f}")
EOF
}

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(gvpr -V 2>&1 | head -1)"
echo "runs per cell: $RUNS (after one warm-up, tools alternating); wall = median seconds [min-max]; cpu = median user+sys seconds; rss = max RSS over the runs; ratios are svc/gvpr"
printf '%8s %6s | %-22s %5s %8s | %-22s %5s %8s | %7s %7s %7s\n' nodes MiB "svc validate wall" cpu rss "gvpr wall" cpu rss "wall" "cpu" "rss"
prev_svc=""; prev_gvpr=""; prev_svc_cpu=""; prev_gvpr_cpu=""; prev_n=""
for n in "${SIZES[@]}"; do
  f="$work/big$n.dot"
  python3 "$GEN" "$n" > "$f"
  # Sanity: both tools must see the same graph.
  ours=$("$SVC" validate --format json "$f" | python3 -c 'import json,sys; d=json.load(sys.stdin)[0]; print(d["node_count"], d["edge_count"], len([x for x in d["diagnostics"] if x["severity"]=="error"]))')
  theirs=$(gvpr "$PROG" "$f")
  [ "${ours% *}" = "$theirs" ] || { echo "count mismatch at $n: svc $ours, gvpr $theirs" >&2; exit 1; }
  [ "${ours##* }" = 0 ] || { echo "svc reports errors on big$n.dot" >&2; exit 1; }
  # One warm-up each (page cache), then alternate the two tools so they share the noise.
  "$SVC" validate "$f" > /dev/null || true
  gvpr "$PROG" "$f" > /dev/null
  rm -f "$work/svc" "$work/gvpr"
  for _ in $(seq "$RUNS"); do
    run_once svc "$SVC" validate "$f"
    run_once gvpr gvpr "$PROG" "$f"
  done
  read -r st sr smin smax sc < <(summary svc)
  read -r gt gr gmin gmax gc < <(summary gvpr)
  mib=$(python3 -c "import os; print(f'{os.path.getsize(\"$f\")/1048576:.1f}')")
  ratio() { python3 -c "print(f'{$1/$2:.2f}' if $2 > 0 else 'n/a')"; }
  printf '%8s %6s | %-22s %5s %4d MiB | %-22s %5s %4d MiB | %7s %7s %7s\n' "$n" "$mib" \
    "$st [$smin-$smax]" "$sc" $((sr / 1024)) "$gt [$gmin-$gmax]" "$gc" $((gr / 1024)) \
    "$(ratio "$st" "$gt")" "$(ratio "$sc" "$gc")" "$(ratio "$sr" "$gr")"
  if [ -n "$prev_n" ]; then
    echo "         x$((n / prev_n)) nodes: svc wall x$(ratio "$st" "$prev_svc") cpu x$(ratio "$sc" "$prev_svc_cpu"), gvpr wall x$(ratio "$gt" "$prev_gvpr") cpu x$(ratio "$gc" "$prev_gvpr_cpu")"
  fi
  prev_svc=$st; prev_gvpr=$gt; prev_svc_cpu=$sc; prev_gvpr_cpu=$gc; prev_n=$n
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
