#!/usr/bin/env bash
# Runs `go ARGS...` with a current Go release (go1.26, the toolchain the npm package
# @ttsc/linux-x64 bundles: Debian ships Go 1.19 only), installed first into DIR/go-current from
# tests/fixtures/go/current's package-lock.json. Usage: go-current.sh DIR go ARGS...
# Where npm cannot install it, a build outside CI goes on without (the tests that need its
# fixtures skip); under CI=true that is an error.
set -euo pipefail

dir="$1/go-current"
shift
[[ "${1:-}" == go ]] || { echo "usage: go-current.sh DIR go ARGS..." >&2; exit 2; }
shift
lock_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/fixtures/go/current" && pwd)"
go="$dir/node_modules/@ttsc/linux-x64/bin/go/bin/go"
stamp="$dir/node_modules/.bpfprof-stamp"

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
want="$(cat "$lock_dir/package.json" "$lock_dir/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ ! -x "$go" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  cp "$lock_dir/package.json" "$lock_dir/package-lock.json" "$dir/"
  if ! (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2); then
    if [[ "${CI:-}" == true ]]; then
      echo "go-current: npm could not install the Go toolchain into $dir" >&2
      exit 1
    fi
    echo "go-current: npm could not install the Go toolchain; its fixtures are not built" >&2
    exit 0
  fi
  echo "$want" > "$stamp"
fi
exec 9>&-
GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod exec "$go" "$@"
