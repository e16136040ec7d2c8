#!/usr/bin/env bash
# The layering of the libraries (userspace/CMakeLists.txt), checked on the #include lines:
# a folder may include only itself and the folders it builds on. All headers are reachable
# from the project root, so the include path alone cannot enforce this.
set -euo pipefail
cd "$(dirname "$0")/../.."

declare -A allowed=(
  [symbols]="symbols bpf"
  [userspace/model]="userspace/model symbols bpf"
  [runtimes]="runtimes userspace/model symbols bpf"
  [userspace/capture]="userspace/capture runtimes userspace/model symbols bpf"
  [userspace/output]="userspace/output userspace/model symbols bpf"
  [userspace/serve]="userspace/serve userspace/output userspace/model symbols bpf"
  [userspace/session]="userspace/session userspace/serve userspace/capture userspace/output userspace/model symbols bpf"
  [userspace/cli]="userspace/cli userspace/session userspace/serve userspace/capture userspace/output userspace/model symbols bpf"
)

status=0
for layer in "${!allowed[@]}"; do
  while IFS=: read -r file _ include; do
    target=$(sed -E 's/#include "([^"]+)".*/\1/' <<<"$include")
    [[ "$target" == */* ]] || continue  # a sibling header, e.g. a BPF skeleton
    ok=0
    for dep in ${allowed[$layer]}; do
      [[ "$target" == "$dep"/* || "$target" == "$dep" ]] && ok=1 && break
    done
    if ((!ok)); then
      echo "$file includes $target: $layer may build only on ${allowed[$layer]}"
      status=1
    fi
  done < <(git ls-files "$layer" | grep -E '\.(h|cpp|c)$' | xargs grep -Hn '^#include "' || true)
done

# The kernel side: bpf/ is generic and includes only bpf/ (besides vmlinux.h and libbpf's
# headers); the program (bpf/*.bpf.c) includes the runtimes' kernel sides through the one list
# of them, runtimes/kernel_side.bpf.h, which includes each runtime's. A runtime's kernel part
# and what it shares with userspace (runtimes/<name>/*.bpf.h, events.h) include bpf/,
# runtimes/kit and their own folder.
while IFS=: read -r file _ include; do
  target=$(sed -E 's/#include "([^"]+)".*/\1/' <<<"$include")
  case "$file" in
    bpf/*.bpf.c) deps="bpf runtimes/kernel_side.bpf.h" ;;
    bpf/*) deps="bpf" ;;
    runtimes/*/*) deps="bpf runtimes/kit ${file%/*}" ;;
    *) deps="bpf runtimes" ;;
  esac
  ok=0
  [[ "$target" == vmlinux.h ]] && ok=1
  for dep in $deps; do
    [[ "$target" == "$dep"/* || "$target" == "$dep" ]] && ok=1 && break
  done
  if ((!ok)); then
    echo "$file includes $target: it may include only $deps"
    status=1
  fi
done < <(git ls-files 'bpf/*.h' 'bpf/*.c' 'runtimes/*.bpf.h' 'runtimes/*/events.h' | xargs grep -Hn '^#include "' || true)

# Within runtimes/, a runtime's folder includes only itself and runtimes/kit (what runtimes
# share), never another runtime's folder; runtimes/kit includes no runtime's.
while IFS=: read -r file _ include; do
  target=$(sed -E 's/#include "([^"]+)".*/\1/' <<<"$include")
  own=$(cut -d/ -f1-2 <<<"$file")
  [[ "$target" == runtimes/*/* ]] || continue
  [[ "$target" == "$own"/* || "$target" == runtimes/kit/* ]] && continue
  echo "$file includes $target: a runtime may include only its own folder and runtimes/kit"
  status=1
done < <(git ls-files 'runtimes/*/*' | grep -E '\.(h|cpp|c)$' | xargs grep -Hn '^#include "' || true)
exit $status
