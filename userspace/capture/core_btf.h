// The kernel's types that a BPF object's CO-RE relocations name, as a BTF of their own, for
// libbpf's btf_custom_path: an object opened with it relocates without parsing the kernel's
// whole BTF (5.5 MB read, copied and indexed: 11 MB of the heap for each object loaded at
// once, the recorder's peak).
//
// Each type a relocation names is written whole, with what its members embed (structs,
// unions and arrays inside it, which an access path may cross), down to the types a member
// ends in: integers, enums, floats, and pointers, which are written as `void *` (an access
// path ends at a pointer, and libbpf takes any pointer for another). So every field of those
// types is there at the kernel's offset, and a relocation finds what it would in the kernel's
// BTF. The kinds of relocation on types and enum values are answered from the same types; a
// pointer type itself as a relocation's target is refused (its pointee would be lost).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

struct btf;

namespace bpfprof {

// The relocations of the BPF objects `object_elves` (their .BTF and .BTF.ext sections) resolved
// against `kernel`, as raw BTF bytes: one BTF for them all. Throws std::runtime_error when an
// object cannot be read or a relocation names what this cannot write.
std::string minimal_core_btf(const btf& kernel,
                             std::initializer_list<std::span<const uint8_t>> object_elves);

// The kernel BTF id that a tp_btf program for `tracepoint` attaches to (its btf_trace_<name>
// typedef); 0 when the kernel has no such tracepoint.
uint32_t tracepoint_btf_id(const btf& kernel, std::string_view tracepoint);

}  // namespace bpfprof
