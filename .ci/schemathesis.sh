#!/usr/bin/env bash
# Property-based API testing: schemathesis against the OpenAPI document the real binary
# serves (`svc server start --dev` on loopback, a throw-away state directory), with the dev
# token, every operation except the SSE streams and the two that call out (an MCP server
# test, a completion: a real provider), a fixed seed and a
# bounded example count. Fails on any 5xx, response-schema, status-code or content-type
# failure.
set -euo pipefail
cd "$(dirname "$0")/.."

SEED=${SCHEMATHESIS_SEED:-20261125}
EXAMPLES=${SCHEMATHESIS_MAX_EXAMPLES:-50}

# Pinned, so a given seed generates the same cases. An installed `st` of that version is used
# as it is; otherwise a private virtualenv (Debian's system Python refuses `pip install`).
VERSION=4.32.5
if command -v st >/dev/null 2>&1 && st --version 2>/dev/null | grep -q "version $VERSION\$"; then
  ST=st
else
  venv=${SVC_SCHEMATHESIS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/svc-schemathesis-$VERSION}
  if [ ! -x "$venv/bin/st" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "schemathesis==$VERSION"
  fi
  ST="$venv/bin/st"
fi

cargo build --quiet --bin svc
state=$(mktemp -d -t svc-schemathesis.XXXXXX)
out="$state/stdout.log"
./target/debug/svc server start --dev --state-dir "$state" --listen 127.0.0.1:0 \
  >"$out" 2>"$state/stderr.log" &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$state"
}
trap cleanup EXIT

url=""
for _ in $(seq 1 200); do
  url=$(sed -n 's/^svc: listening on \(http:\/\/.*\)$/\1/p' "$out" | head -n1)
  [ -n "$url" ] && break
  sleep 0.05
done
if [ -z "$url" ]; then
  echo "schemathesis.sh: the server did not start:" >&2
  cat "$state/stderr.log" >&2
  exit 1
fi
token=$(tr -d '\n' <"$state/dev-token")

# From the throw-away directory: schemathesis keeps a cache of past failures (replayed
# first) under ./.schemathesis, which would make one run depend on the previous ones.
cd "$state"
"$ST" run "$url/api/v1/openapi.json" \
  --url "$url" \
  --header "Authorization: Bearer $token" \
  --exclude-path-regex '/attach$|/mcp-servers/[^/]*/test$|/completions$' \
  --phases examples,coverage,fuzzing,stateful \
  --checks not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance \
  --seed "$SEED" \
  --max-examples "$EXAMPLES" \
  --workers 1 \
  --request-timeout 30 \
  --no-color "$@"
