#!/usr/bin/env bash
# Checks that two `svc` builds say exactly the same thing when validating: stdout, stderr and
# exit code of `svc validate FILE` and `svc validate --format json FILE`, over
#   - every .dot/.gv/.fabro file under testdata/ (and ../shared/corpus when it exists),
#   - gen_big.py graphs (1,000 and 10,000 nodes),
#   - MUTANTS (default 300) mutated copies of those files (characters deleted, lines
#     duplicated or swapped, tokens inserted: syntax errors, unknown attributes, bad
#     conditions, duplicate start nodes, keywords as ids, invalid UTF-8, ...), seeded,
#   - several files in one call, a missing file, and the argument forms the short path and
#     clap share (`--format=json`, `--format json` after the files).
# Use it after a change to parsing, the model or validation, against a build of the base:
#
#   git worktree add /tmp/base HEAD~1 && (cd /tmp/base && cargo build --release)
#   bash benches/validate_identity.sh /tmp/base/target/release/svc target/release/svc
#
# Prints the first differences and exits 1 if there are any.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 BASE_SVC NEW_SVC" >&2; exit 2; }
BASE=$1 NEW=$2 MUTANTS=${MUTANTS:-300}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/files"

python3 benches/gen_big.py 1000 > "$work/files/big1000.dot"
python3 benches/gen_big.py 10000 > "$work/files/big10000.dot"
sources=()
while IFS= read -r f; do sources+=("$f"); done < <(
  find testdata ../shared/corpus -type f \( -name '*.dot' -o -name '*.gv' -o -name '*.fabro' \) 2>/dev/null | sort)
sources+=("$work/files/big1000.dot")

# Mutants: small seeded edits of real files, so that most of them fail somewhere new.
python3 - "$work/files" "$MUTANTS" "${sources[@]}" <<'EOF'
import random, sys
out, count, srcs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rnd = random.Random(16)
tokens = ['[', ']', '{', '}', ';', ',', '=', '->', '"', '\\', '/*', '*/', '//', '\n', 'node',
          'edge', 'graph', 'subgraph', 'digraph', 'start [shape=Mdiamond]', 'exit',
          'x [bogus_attr=1]', 'a -> b [condition="outcome=="]', 'n [timeout="5 parsecs"]',
          'q [type="nope"]', 'graph [model_stylesheet="* { model: ; }"]', '\xff', 'é',
          'subgraph cluster_x { label="Team A"; node [class="k"]; s1 -> s2 }',
          'edge [weight=2]', 'node [shape=box, prompt="$goal and $nothing"]', '-1.5', '0xff']
for i in range(count):
    data = open(rnd.choice(srcs), 'rb').read()
    for _ in range(rnd.randint(1, 3)):
        kind = rnd.randrange(4)
        at = rnd.randrange(len(data) + 1)
        if kind == 0 and data:
            data = data[:at] + data[at + rnd.randint(1, 8):]
        elif kind == 1:
            lines = data.split(b'\n')
            j = rnd.randrange(len(lines))
            lines.insert(j, lines[rnd.randrange(len(lines))])
            data = b'\n'.join(lines)
        elif kind == 2:
            lines = data.split(b'\n')
            j, k = rnd.randrange(len(lines)), rnd.randrange(len(lines))
            lines[j], lines[k] = lines[k], lines[j]
            data = b'\n'.join(lines)
        else:
            t = rnd.choice(tokens)
            data = data[:at] + (t.encode('latin-1') if t == '\xff' else t.encode()) + data[at:]
    open(f'{out}/mutant{i:04}.dot', 'wb').write(data)
EOF

run() { # BIN ARGS... -> one record: exit code, stdout, stderr
  local bin=$1; shift
  local rc=0
  "$bin" "$@" > "$work/out" 2> "$work/err" || rc=$?
  printf 'exit %s\n' "$rc"; cat "$work/out"; echo '--- stderr'; cat "$work/err"
}

calls=0 diffs=0
check() { # ARGS...
  calls=$((calls + 1))
  run "$BASE" "$@" > "$work/a"
  run "$NEW" "$@" > "$work/b"
  if ! cmp -s "$work/a" "$work/b"; then
    diffs=$((diffs + 1))
    if [ "$diffs" -le 5 ]; then
      echo "DIFFERENT: svc $*"
      diff "$work/a" "$work/b" | head -20
    fi
  fi
}

for f in "${sources[@]}" "$work/files"/*.dot; do
  check validate "$f"
  check validate --format json "$f"
done
check validate "${sources[@]:0:5}"
check validate --format=json "${sources[@]:0:5}"
check validate "${sources[0]}" --format json
check validate "$work/files/missing.dot" "${sources[0]}"
check validate --format json "$work/files/missing.dot"

echo "$calls calls, $diffs different"
[ "$diffs" -eq 0 ]
