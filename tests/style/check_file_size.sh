#!/usr/bin/env bash
# No source file longer than 600 lines: a file that long holds several jobs, each of which
# reads better in a file named for it. Checked on the files git tracks (C, C++, BPF headers,
# JavaScript modules, shell, Python and CMake), leaving out what is not written by hand to be
# read: the fuzzers' corpus and installed node modules.
set -euo pipefail
cd "$(dirname "$0")/../.."

limit=600
long=$(git ls-files -z -- '*.c' '*.cpp' '*.h' '*.mjs' '*.sh' '*.py' '*.cmake' '*CMakeLists.txt' \
         ':!:tests/fuzz/corpus/**' ':!:**/node_modules/**' |
       xargs -0 -r wc -l | awk -v limit="$limit" '$2 != "total" && $1 > limit' | sort -rn)
if [[ -n "$long" ]]; then
  echo "$long"
  echo "$(wc -l <<<"$long") file(s) over $limit lines"
  exit 1
fi
echo "no source file over $limit lines"
