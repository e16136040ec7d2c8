# The sources of the runtimes (runtimes/<name>/, one folder each), compiled into
# bpfprof_runtimes (userspace/CMakeLists.txt) and by the fuzzing build (tests/fuzz), which
# include this file with BPFPROF_RUNTIMES_DIR set. A new runtime adds its files here.
set(BPFPROF_RUNTIMES_SOURCES
  ${BPFPROF_RUNTIMES_DIR}/kit/merge.cpp
  ${BPFPROF_RUNTIMES_DIR}/kit/process_tracker.cpp
  ${BPFPROF_RUNTIMES_DIR}/kit/release.cpp
  ${BPFPROF_RUNTIMES_DIR}/kit/x86_code.cpp
  ${BPFPROF_RUNTIMES_DIR}/registry.cpp
  ${BPFPROF_RUNTIMES_DIR}/beam/binary.cpp
  ${BPFPROF_RUNTIMES_DIR}/beam/code_index.cpp
  ${BPFPROF_RUNTIMES_DIR}/beam/names.cpp
  ${BPFPROF_RUNTIMES_DIR}/golabels/processes.cpp
  ${BPFPROF_RUNTIMES_DIR}/golabels/runtime.cpp
  ${BPFPROF_RUNTIMES_DIR}/hotspot/code_cache.cpp
  ${BPFPROF_RUNTIMES_DIR}/hotspot/debug_info.cpp
  ${BPFPROF_RUNTIMES_DIR}/hotspot/layout.cpp
  ${BPFPROF_RUNTIMES_DIR}/hotspot/names.cpp
  ${BPFPROF_RUNTIMES_DIR}/kit/remote_memory.cpp
  ${BPFPROF_RUNTIMES_DIR}/hotspot/runtime.cpp
  ${BPFPROF_RUNTIMES_DIR}/hotspot/thread_names.cpp
  ${BPFPROF_RUNTIMES_DIR}/hotspot/vm_structs.cpp
  ${BPFPROF_RUNTIMES_DIR}/php/jit_stubs.cpp
  ${BPFPROF_RUNTIMES_DIR}/php/names.cpp
  ${BPFPROF_RUNTIMES_DIR}/php/processes.cpp
  ${BPFPROF_RUNTIMES_DIR}/php/runtime.cpp
  ${BPFPROF_RUNTIMES_DIR}/python/code.cpp
  ${BPFPROF_RUNTIMES_DIR}/python/processes.cpp
  ${BPFPROF_RUNTIMES_DIR}/python/runtime.cpp
  ${BPFPROF_RUNTIMES_DIR}/python/stacks.cpp
  ${BPFPROF_RUNTIMES_DIR}/ruby/iseqs.cpp
  ${BPFPROF_RUNTIMES_DIR}/ruby/processes.cpp
  ${BPFPROF_RUNTIMES_DIR}/ruby/runtime.cpp
  ${BPFPROF_RUNTIMES_DIR}/v8/layout.cpp
  ${BPFPROF_RUNTIMES_DIR}/v8/objects.cpp
  ${BPFPROF_RUNTIMES_DIR}/v8/processes.cpp
  ${BPFPROF_RUNTIMES_DIR}/v8/runtime.cpp
  ${BPFPROF_RUNTIMES_DIR}/v8/stacks.cpp)
