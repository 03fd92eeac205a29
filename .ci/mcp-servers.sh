#!/usr/bin/env bash
# Installs the real MCP servers the MCP tests drive, from the package registries, into a
# project-local directory (default `.mcp-servers/` at the repository root, or
# $SVC_MCP_SERVERS_DIR): a Python virtualenv with the reference servers `mcp-server-time`,
# `mcp-server-git`, `mcp-server-fetch` and the `mcp` SDK (the tests' HTTP server is made with
# it), and `@modelcontextprotocol/server-everything` from npm. Versions are pinned so a test
# run is repeatable. Safe to run again: what is there already is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${SVC_MCP_SERVERS_DIR:-$PWD/.mcp-servers}
PY_PACKAGES=(
  "mcp==2.3.0"
  "mcp-server-time==2026.10.19"
  "mcp-server-git==2026.10.19"
  "mcp-server-fetch==2026.10.24"
)
NPM_PACKAGES=("@modelcontextprotocol/server-everything@2026.8.31")

mkdir -p "$dir"
stamp="$dir/.installed"
want="${PY_PACKAGES[*]} ${NPM_PACKAGES[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

if [ ! -x "$dir/venv/bin/python" ]; then
  python3 -m venv "$dir/venv"
fi
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check "${PY_PACKAGES[@]}"

mkdir -p "$dir/npm"
npm install --silent --no-audit --no-fund --prefix "$dir/npm" "${NPM_PACKAGES[@]}" >/dev/null

echo "$want" >"$stamp"
