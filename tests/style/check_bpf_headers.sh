#!/usr/bin/env bash
# Every header of the kernel side (bpf/*.h, runtimes/*.bpf.h, runtimes/<name>/*.bpf.h) includes
# what it uses: each compiles on its own, with the BPF object's compiler and flags (given as
# arguments by bpf/CMakeLists.txt) and -Werror, since a function used without its declaration
# is only a warning in C. The headers shared with userspace (plain C, which include
# <linux/types.h> unless vmlinux.h came first) compile after vmlinux.h, as the BPF object sees
# them. Usage: check_bpf_headers.sh CLANG FLAG...
set -euo pipefail
(($# > 0)) || { echo "usage: check_bpf_headers.sh CLANG FLAG..."; exit 2; }
cd "$(dirname "$0")/../.."
shopt -s nullglob

status=0
for header in bpf/*.h runtimes/*.bpf.h runtimes/*/*.bpf.h; do
  prefix=""
  grep -q '__VMLINUX_H__' "$header" && prefix='#include "vmlinux.h"'
  if ! out=$(printf '%s\n#include "%s"\n' "$prefix" "$header" |
    "$@" -Werror -fsyntax-only -x c - 2>&1); then
    echo "$header does not compile on its own:"
    echo "$out"
    status=1
  fi
done
((status == 0)) && echo "every BPF header compiles on its own"
exit $status
