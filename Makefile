# The two entry points of the README: `make demo` and `make test`.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
# A new build directory is made for Ninja (a first build is sooner than with make's recursive
# Makefiles); one that exists keeps its generator.
GENERATOR = $(if $(wildcard $(BUILD_DIR)/CMakeCache.txt),,$(if $(shell command -v ninja),-G Ninja))
# A unity build (each library's files compiled 8 to a translation unit) takes half the CPU time
# of one file at a time; a directory that is rebuilt after each edit is better configured
# without it (UNITY=OFF, docs/development.md).
UNITY ?= ON
CONFIGURE = cmake -S . -B $(BUILD_DIR) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_UNITY_BUILD=$(UNITY) >/dev/null

.PHONY: all deps build demo test fuzz bench clean format format-check

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@$(CONFIGURE)
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Records a bundled workload: two processes, named threads, kernel time.
demo: build
	$(BUILD_DIR)/bpfprof record -o demo.json.gz -- sh -c \
	  '$(BUILD_DIR)/tests/fixtures/threads 1500 & $(BUILD_DIR)/tests/fixtures/syscalls 1500; wait'
	@echo
	@echo "Profile written to $(CURDIR)/demo.json.gz"
	@echo "Open it: drag it onto https://profiler.firefox.com (or use 'Load a profile from file')."

# The programs the recordings run are built first; then the recordings (ctest label
# integration) start, while the rest of the build, the unit and style tests, the fuzz targets'
# build and short run (ctest label fuzz) and the benchmark programs' build go one after another
# at idle priority (SCHED_IDLE) beside them: they take only the CPU time the recordings leave.
# Tests run $(JOBS) at a time, except the recordings that measure CPU time, scheduling or
# losses, which run alone (RUN_SERIAL in tests/integration/CMakeLists.txt). The integration
# tests' Node packages, Chromium and the current Go toolchain are installed while the first build
# runs (mostly download and unpacking).
test: deps
	@mkdir -p $(BUILD_DIR) && { \
	  scripts/setup-profiler-cli.sh > $(BUILD_DIR)/setup-profiler-cli.log 2>&1 & setup=$$!; \
	  scripts/install-deps.sh --browser > $(BUILD_DIR)/install-browser.log 2>&1 & browser=$$!; \
	  scripts/go-current.sh $(BUILD_DIR)/tests/fixtures/go go version > $(BUILD_DIR)/go-current.log 2>&1 & gocurrent=$$!; \
	  $(CONFIGURE) && \
	  cmake --build $(BUILD_DIR) -j $(JOBS) --target integration_programs; status=$$?; \
	  wait $$setup || { cat $(BUILD_DIR)/setup-profiler-cli.log; status=1; }; \
	  wait $$browser || { cat $(BUILD_DIR)/install-browser.log; status=1; }; \
	  wait $$gocurrent || { cat $(BUILD_DIR)/go-current.log; status=1; }; \
	  exit $$status; }
	@cd $(BUILD_DIR) && rm -f rest-build.status unit-test.status && { \
	  { chrt --idle 0 cmake --build . -j $(JOBS) > rest-build.log 2>&1; echo $$? > rest-build.status; \
	    [ "$$(cat rest-build.status)" = 0 ] || exit 1; \
	    chrt --idle 0 ctest -LE 'fuzz|integration' --output-on-failure -j $(JOBS) > unit-test.log 2>&1; \
	    echo $$? > unit-test.status; \
	    INPUT_TIMEOUT=60 chrt --idle 0 ctest -L fuzz --output-on-failure && \
	    chrt --idle 0 cmake --build . -j $(JOBS) --target bench_programs; } > fuzz-test.log 2>&1 & rest=$$!; \
	  ctest -L integration --output-on-failure -j $(JOBS); status=$$?; \
	  wait $$rest; fuzz_status=$$?; \
	  if [ "$$(cat rest-build.status 2>/dev/null)" != 0 ]; then cat rest-build.log; exit 1; fi; \
	  if [ "$$(cat unit-test.status)" = 0 ]; then grep -E 'tests passed|Total Test time' unit-test.log; \
	  else cat unit-test.log; status=1; fi; \
	  if [ $$fuzz_status = 0 ]; then grep -E 'tests passed|Total Test time' fuzz-test.log; \
	  else cat fuzz-test.log; status=1; fi; \
	  exit $$status; }

# Every libFuzzer target of tests/fuzz for 120 s, one per CPU at a time (make test runs them
# for 3 s each at -O0, as ctest's fuzz.short); a crash, leak or hang fails it, its reproducer kept in
# $(BUILD_DIR)/fuzz.
fuzz:
	@SECONDS_PER_TARGET=120 tests/fuzz/run.sh $(BUILD_DIR)/fuzz

clean:
	rm -rf $(BUILD_DIR)

# The tree's C, C++ and BPF sources in the style of .clang-format.
FORMAT_SOURCES = $(shell git ls-files '*.c' '*.cpp' '*.h')
format:
	@clang-format-14 -i $(FORMAT_SOURCES)
format-check:
	@clang-format-14 --dry-run --Werror $(FORMAT_SOURCES)

# Every benchmark of bench/ (root; about 10 minutes); the tables go to the terminal and to
# $(BUILD_DIR)/bench-results.md, from which bench/RESULTS.md is updated.
bench: build
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target bench_programs
	@scripts/install-deps.sh --bench
	@{ echo "# make bench, $$(date -u '+%Y-%m-%d %H:%M UTC'), $$(nproc) CPUs, $$(uname -r)"; \
	  echo; echo "## Overhead (bench/overhead.sh)"; bench/overhead.sh 2>/dev/null; \
	  echo; echo "## Overhead, deep stacks (SHAPE=deep bench/overhead.sh)"; SHAPE=deep bench/overhead.sh 2>/dev/null; \
	  echo; echo "## One sample's cost in the interrupt (bench/sample_cost.sh)"; bench/sample_cost.sh 2>/dev/null; \
	  echo; echo "## What recording adds to each system call (bench/syscall_cost.sh)"; bench/syscall_cost.sh 2>/dev/null; \
	  echo; echo "## What record --cgroup costs the rest of the machine (bench/cgroup_cost.sh)"; bench/cgroup_cost.sh 2>/dev/null; \
	  echo; echo "## Unwind tables ($(BUILD_DIR)/bench/unwind_table_bench)"; $(BUILD_DIR)/bench/unwind_table_bench; \
	  echo; echo "## The verifier's cost per program ($(BUILD_DIR)/bench/verify_cost)"; $(BUILD_DIR)/bench/verify_cost $(BUILD_DIR)/bpf/profiler.bpf.o; \
	  echo; echo "## Capacity (bench/capacity.sh)"; bench/capacity.sh; \
	  echo; bench/pipeline.sh; \
	  echo; echo "## perf on the same fixtures (bench/perf_pipeline.sh)"; bench/perf_pipeline.sh; \
	  echo; echo "## Start-up (bench/startup.py)"; bench/startup.py; \
	  echo; echo "## System-wide scale (bench/system_wide_scale.sh)"; bench/system_wide_scale.sh; \
	  echo; echo "## Off-CPU overhead (bench/offcpu_overhead.sh)"; bench/offcpu_overhead.sh; \
	  for r in go node java; do echo; echo "## $$r (RUNTIME=$$r bench/runtime_overhead.sh)"; \
	    RUNTIME=$$r BUILD_DIR=$(BUILD_DIR) bench/runtime_overhead.sh 2>/dev/null; done; \
	  echo; echo "## Symbolization ($(BUILD_DIR)/bench/symbolize_bench)"; $(BUILD_DIR)/bench/symbolize_bench; \
	  echo; echo "## Stacks on real programs (bench/real_programs.sh)"; BUILD_DIR=$(BUILD_DIR) bench/real_programs.sh; \
	} 2>&1 | tee $(BUILD_DIR)/bench-results.md
