#!/usr/bin/env bash
# Installs what bpfprof needs to build and test on Debian 12 (run as root). Idempotent:
# installs only the packages that are missing. With --bench, also what bench/ needs beyond
# that (perf, for bench/real_programs.sh and bench/perf_pipeline.sh; bpftrace, for
# bench/sample_cost.sh; LLVM's headers and Chromium, for bench/whole_machine.sh). With
# --browser, Chromium alone (tests/integration/chromium.test.mjs; make test installs it in the
# background while the first build runs: a large download).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang clang-format
  libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev libxxhash-dev
  libcli11-dev libgtest-dev libbenchmark-dev libiberty-dev
  nlohmann-json3-dev libcapstone-dev libcpp-httplib-dev
  # serve: libraries by build-id from debuginfod; a local debuginfod server in the tests
  libdebuginfod-dev debuginfod
  # pprof output, record --upload; go tool pprof checks pprof in the tests
  libprotobuf-dev protobuf-compiler libcurl4-openssl-dev golang-go
  nodejs npm
  # signals.test.mjs holds the profile's rename with strace's syscall delay
  strace
  # the real programs tests/integration/real_programs.test.mjs records
  sqlite3 xz-utils git coreutils python3
  # a Go program from Debian whose stacks tests/integration/go_stacks.test.mjs records
  fzf
  # the Ruby interpreter tests/integration/ruby_stacks.test.mjs records (CRuby 3.1)
  ruby3.1
  # the PHP interpreters tests/integration/php_stacks.test.mjs records (the CLI with opcache's
  # JIT, php-fpm and a FastCGI client for it), and PHP's own sampler
  php8.2-cli php8.2-opcache php8.2-fpm libfcgi-bin php-excimer
  # the Erlang emulator (OTP 25) whose code index tests/unit/beam_test.cpp reads, and Elixir
  # (1.14, on it): the programs tests/integration/beam_stacks.test.mjs records
  erlang-base elixir
  # Perl's own profiler, which tests/integration/perl_stacks.test.mjs compares with (perl and
  # pod2man are Debian's base)
  libdevel-nytprof-perl
)
if [[ "${1:-}" == --browser ]]; then
  packages=(chromium)
elif [[ "${1:-}" == --bench ]]; then
  packages+=(linux-perf bpftrace)
  # bench/whole_machine.sh: clang++ on LLVM's headers (libLLVM), headless Chromium
  packages+=(llvm-14-dev chromium)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# A node from elsewhere (e.g. nodesource) replaces Debian's nodejs/npm packages.
if command -v node >/dev/null && command -v npm >/dev/null; then
  filtered=()
  for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing packages (${missing[*]}); run as root" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
