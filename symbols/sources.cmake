# The sources of bpfprof_symbols, also compiled by the fuzzing build (tests/fuzz), which
# includes this file with BPFPROF_SYMBOLS_DIR set.
set(BPFPROF_SYMBOLS_SOURCES
  ${BPFPROF_SYMBOLS_DIR}/util/read_file.cpp
  ${BPFPROF_SYMBOLS_DIR}/util/untrusted_file.cpp
  ${BPFPROF_SYMBOLS_DIR}/util/proc_maps.cpp
  ${BPFPROF_SYMBOLS_DIR}/util/held_file.cpp
  ${BPFPROF_SYMBOLS_DIR}/util/atomic_file.cpp
  ${BPFPROF_SYMBOLS_DIR}/util/run_program.cpp
  ${BPFPROF_SYMBOLS_DIR}/util/lazy_library.cpp
  ${BPFPROF_SYMBOLS_DIR}/util/capstone_on_demand.cpp
  ${BPFPROF_SYMBOLS_DIR}/util/x86_decoder.cpp
  ${BPFPROF_SYMBOLS_DIR}/elf/elf_file.cpp
  ${BPFPROF_SYMBOLS_DIR}/elf/symbol_span.cpp
  ${BPFPROF_SYMBOLS_DIR}/elf/symbol_table.cpp
  ${BPFPROF_SYMBOLS_DIR}/elf/plt_symbols.cpp
  ${BPFPROF_SYMBOLS_DIR}/elf/symbol_cache.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/dwarf_module.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/debug_frame_file.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/cfi_functions.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/cfi_rows.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/crt_stubs.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/stack_height.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/v8_builtins.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/unwind_spans.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/cfi_spans.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/go_spans.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/no_cfi_spans.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/code_gaps.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/unwind_table.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/compact_unwind_table.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/unwind_table_cache.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/unwinder.cpp
  ${BPFPROF_SYMBOLS_DIR}/dwarf/debug_hint.cpp
  ${BPFPROF_SYMBOLS_DIR}/kernel/kallsyms.cpp
  ${BPFPROF_SYMBOLS_DIR}/jit/perf_map.cpp
  ${BPFPROF_SYMBOLS_DIR}/go/pclntab.cpp
  ${BPFPROF_SYMBOLS_DIR}/go/elf_pclntab.cpp
  ${BPFPROF_SYMBOLS_DIR}/go/cgo_switches.cpp
  ${BPFPROF_SYMBOLS_DIR}/go/vdso_calls.cpp
  ${BPFPROF_SYMBOLS_DIR}/go/go_release.cpp
  ${BPFPROF_SYMBOLS_DIR}/go/labels_layout.cpp
  ${BPFPROF_SYMBOLS_DIR}/demangle.cpp
  ${BPFPROF_SYMBOLS_DIR}/relative_address.cpp
  ${BPFPROF_SYMBOLS_DIR}/symbolizer.cpp)
# libiberty's demangle.h declares basename() unlike glibc's string.h: compiled on its own in a
# unity build.
set_source_files_properties(${BPFPROF_SYMBOLS_DIR}/demangle.cpp PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
