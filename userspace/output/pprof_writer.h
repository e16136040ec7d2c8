// pprof output: google/pprof's profile.proto (userspace/output/profile.proto, serialized by
// libprotobuf), made from the same built tables as the Firefox profile, so that a frame has
// one name in every format. Go's `go tool pprof`, Pyroscope, Parca and other fleet backends
// read it.
#pragma once

#include <string>

#include "userspace/output/output_file.h"
#include "userspace/output/profile_builder.h"

namespace bpfprof {

// What a pprof profile says about the recording besides its samples.
struct PprofSettings {
  double start_wall_clock_ms = 0;  // ms since the epoch
  double duration_ms = 0;
  double interval_ms = 1;  // the sampling interval: off-CPU weights are in its units
  bool off_cpu = false;    // off-CPU waits were recorded: an off-cpu/nanoseconds value
  bool memory = false;     // record --memory: an alloc_space/bytes value
  bool held = false;       // record --allocations: an inuse_space/bytes value too
  std::string comment;     // shown by pprof as is (sampling event, frequency)
  // record --memory: a mapped_space/bytes value, the address space's sampled growth.
  bool address_space = false;
};

// Sample types: samples/count (timer samples), cpu/nanoseconds (the kernel's CPU time of the
// thread), with off_cpu off-cpu/nanoseconds (how long the thread waited), with memory
// alloc_space/bytes (memory first touched or allocated, as go tool pprof names it), with held
// inuse_space/bytes (the sampled blocks not freed by the end), with address_space
// mapped_space/bytes (what the sampled mmap, brk and mremap calls grew). One sample per
// thread and stack with the labels pid, tid, process_name, thread_name and, for a wait,
// off_cpu_state. Each library is a mapping (file, build-id) whose addresses are the
// library-relative ones laid out from memory_start: address - memory_start + file_offset is
// the address the Firefox profile gives. Inlined functions at an address are the lines of
// one location, innermost first. Writes the serialized message (gzip comes from the sink).
void write_pprof(const BuiltProfile& profile, const PprofSettings& settings, OutputSink& sink);

}  // namespace bpfprof
