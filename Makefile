# The two entry points of the README: `make demo` and `make test`.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build demo test bench clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Records a bundled workload: two processes, named threads, kernel time.
demo: build
	$(BUILD_DIR)/bpfprof record -o demo.json.gz -- sh -c \
	  '$(BUILD_DIR)/tests/fixtures/threads 1500 & $(BUILD_DIR)/tests/fixtures/syscalls 1500; wait'
	@echo
	@echo "Profile written to $(CURDIR)/demo.json.gz"
	@echo "Open it: drag it onto https://profiler.firefox.com (or use 'Load a profile from file')."

test: build
	@scripts/setup-profiler-cli.sh
	@cd $(BUILD_DIR) && ctest --output-on-failure -j 1

clean:
	rm -rf $(BUILD_DIR)

bench: build
	bench/overhead.sh
	$(BUILD_DIR)/bench/pipeline_bench
	$(BUILD_DIR)/bench/symbolize_bench
	bench/system_wide_scale.sh
	bench/offcpu_overhead.sh
