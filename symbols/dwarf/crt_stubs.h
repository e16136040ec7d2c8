// The .init and .fini sections that glibc's crti.o and crtn.o assemble from two halves,
// `[endbr64] sub $8,%rsp` ... `add $8,%rsp; ret`, with calls between them. They have no CFI,
// yet every library runs its _init once when it is loaded, and often the sample lands there,
// in the page fault of the section's first instruction: without rules, such a stack was cut
// at _init. Their rules follow from the two halves' bytes (1,510 of 1,510 files with a
// .init on Debian 12 have this shape).
#pragma once

#include <gelf.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace bpfprof {

// One such section, in the file's virtual addresses: CFA = rsp + 8 in [start, body) and
// [ret, end), rsp + 16 in [body, ret); the return address at CFA - 8, rbp unchanged.
struct CrtStub {
  uint64_t start = 0;
  uint64_t body = 0;  // just past `sub $8,%rsp`
  uint64_t ret = 0;   // the `ret`
  uint64_t end = 0;

  bool contains(uint64_t pc) const { return pc >= start && pc < end; }
  // CFA - rsp at `pc`, which the section holds.
  uint32_t cfa_offset_at(uint64_t pc) const { return pc >= body && pc < ret ? 16 : 8; }
};

// The stub that the `size` bytes at `address` are, or nullopt if they are not of that shape.
std::optional<CrtStub> match_crt_stub(uint64_t address, const uint8_t* bytes, size_t size);

// The .init and .fini sections of `elf` that are such stubs, sorted by address. Should an FDE
// cover one after all, the caller uses the CFI instead.
std::vector<CrtStub> find_crt_stubs(Elf* elf);

// The stub of a find_crt_stubs() list holding `pc`, or nullptr.
const CrtStub* find_crt_stub(const std::vector<CrtStub>& stubs, uint64_t pc);

// Where an entry point without CFI is a stub that calls into the real start-up code at once
// (the dynamic loader's _start, whose call to _dl_start returns a few bytes past the entry
// point, into _dl_start_user, which runs the constructors): a process's outermost frame.
// [start, end) in the file's virtual addresses; nullopt for a file without an entry point.
// Whether CFI covers it is the caller's to check.
struct EntryStub {
  uint64_t start = 0;
  uint64_t end = 0;

  bool contains(uint64_t pc) const { return pc >= start && pc < end; }
};
std::optional<EntryStub> entry_stub(Elf* elf);

// Whether `vaddr` (the file's virtual address) is at one of the instructions that the child
// side of glibc's clone or clone3 runs before its thread start's CFI begins, read from the
// file's code (bpfprof_in_clone_child_start, bpf/unwind_table.h: the kernel walk's test).
bool is_clone_child_start(Elf* elf, uint64_t vaddr);

}  // namespace bpfprof
