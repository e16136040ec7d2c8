#!/usr/bin/env bash
# No function longer than 80 lines outside the BPF programs: clang-tidy's
# readability-function-size over every userspace, symbols, runtimes and test translation
# unit of a build's compile_commands.json (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON),
# and the project's headers they include. Test fixtures (small C programs shaped for the
# integration tests) are left out. A file clang-tidy cannot compile is not checked, and fails.
# Usage: check_function_size.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: check_function_size.sh BUILD_DIR}
build=$(cd "$build" && pwd)
cd "$(dirname "$0")/../.."
[[ -f "$build/compile_commands.json" ]] || {
  echo "$build/compile_commands.json missing: configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON"
  exit 2
}
config='{CheckOptions: [{key: readability-function-size.LineThreshold, value: 80}]}'
# run-clang-tidy colours its output even into a pipe.
out=$(run-clang-tidy-14 -quiet -p "$build" -j "$(nproc)" -checks='-*,readability-function-size' \
  -header-filter="$PWD/(userspace|symbols|runtimes)/" -config="$config" \
  "$PWD/(userspace|symbols|runtimes|tests/(unit|support|fuzz))/" 2>&1 |
  sed 's/\x1b\[[0-9;]*m//g' || true)
long=$(grep -E 'warning: function .* exceeds recommended size' <<<"$out" | sort -u || true)
unchecked=$(grep -E '^Error while processing' <<<"$out" | sort -u || true)
[[ -n "$long" ]] && echo "$long" && echo "$(wc -l <<<"$long") function(s) over 80 lines"
[[ -n "$unchecked" ]] && echo "$unchecked" && echo "(not checked: clang-tidy could not compile it)"
[[ -z "$long" && -z "$unchecked" ]] || exit 1
echo "no function over 80 lines"
