// Go's own table of functions (the pclntab: `.gopclntab`, runtime.pclntab), which every Go
// binary carries, stripped or not: the runtime needs it for tracebacks and the garbage
// collector. It names each function, and maps each pc to a file, a line and the inlined calls
// around it. Read for the pclntab formats of Go 1.2 (to 1.15), 1.16, 1.18 and 1.20 (to the
// current release), told apart by the table's magic.
//
// The bytes come from a binary any user can build, so nothing in them is trusted: every read
// is bounds-checked, and a lookup does a bounded amount of work (varints of at most 5 bytes,
// table walks and inline chains capped). A table that makes no sense gives no frames; it
// never crashes or hangs.
//
// The symbolizer names Go code with it, and the unwind tables take Go functions' rules from it
// (symbols/dwarf/go_spans.h). It uses nothing but the C++ library.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "symbols/go/go_release.h"

namespace bpfprof::go {

enum class PclntabFormat : uint8_t {
  kGo12,   // 0xfffffffb: Go 1.2 to 1.15, absolute entries, one table
  kGo116,  // 0xfffffffa: Go 1.16 and 1.17, separate name, CU, file and pc-value tables
  kGo118,  // 0xfffffff0: Go 1.18 and 1.19, entries relative to runtime.text
  kGo120,  // 0xfffffff1: Go 1.20 and later, _func has a start line
};
std::string_view format_name(PclntabFormat format);  // "go1.2", "go1.16", ...
// The format whose magic (the table's first 4 bytes, little-endian) this is.
std::optional<PclntabFormat> format_of_magic(uint32_t magic);

// One frame at a pc: the function, and where in it (the file and line of the pc for the
// innermost frame, of the inlined call for the others). line 0: not known.
struct GoFrame {
  std::string function;
  std::string file;
  uint32_t line = 0;
  bool operator==(const GoFrame&) const = default;
};

struct GoFunction {
  std::string_view name;
  uint64_t entry = 0;  // virtual address in the binary's own address space
  uint64_t end = 0;    // the next function's entry
};

// How far sp lies below where it was at the function's entry (just past the return
// address), over [start, end) of its code: Go's pcsp table, what the runtime's own traceback
// steps by. The caller's frame starts at sp + delta + 8.
struct SpDelta {
  uint64_t start = 0;
  uint64_t end = 0;
  int32_t delta = 0;
  bool operator==(const SpDelta&) const = default;
};

// Where Go's own traceback ends at a function (runtime/symtab.go's funcFlag, or the names of
// the runtime functions that had it before the flags existed).
enum class TracebackEnd : uint8_t {
  kNo,
  kTopFrame,     // the outermost frame of a goroutine or thread: goexit, mstart, rt0_go
  kStackSwitch,  // it writes sp (systemstack, mcall, morestack, gogo): no caller from pcsp
};

struct FrameLayout {
  std::vector<SpDelta> sp;  // in pc order, covering the function's code
  TracebackEnd end = TracebackEnd::kNo;
};

// Bytes at a virtual address of the binary: where the inline trees (FUNCDATA) are read.
struct MemoryRange {
  uint64_t vaddr = 0;
  std::span<const uint8_t> bytes;
};

// A pclntab already found, with what the newer formats need from outside it.
struct PclntabInput {
  std::span<const uint8_t> pclntab;
  uint64_t pclntab_vaddr = 0;
  // runtime.text: 1.18+ entries are offsets from it. Unset: the header's textStart, which a
  // position-independent binary leaves for the loader to fill (then 0, and no table).
  std::optional<uint64_t> text_start;
  // go:func.* (moduledata.gofunc): 1.18+ FUNCDATA are offsets from it. Unset: no inline
  // frames for those formats.
  std::optional<uint64_t> gofunc;
  std::vector<MemoryRange> memory;
  std::optional<GoRelease> release;  // the Go release that built the binary, where known
};

// Whether `bytes` start with a pclntab header whose function table is in them and in pc
// order: what from_pclntab checks first, without copying anything.
bool looks_like_pclntab(std::span<const uint8_t> bytes);

// Go's signal handler entry (runtime.sigtramp, and cgoSigtramp, which jumps to it): a top frame
// to Go's traceback, but the kernel's signal frame is above it, and the interrupted code above
// that.
bool is_signal_trampoline(std::string_view name);
// The restorer Go gives the kernel (runtime.sigreturn, from 1.21 runtime.sigreturn__sigaction):
// where the signal handler returns to, with the interrupted context at sp.
bool is_signal_return(std::string_view name);

class GoTable {
 public:
  // The table of an ELF file's bytes (little-endian, 32 or 64 bits): the `.gopclntab`
  // section, else a pclntab found by its magic in the read-only segments. nullptr (and a
  // reason in *error) when the file is not a Go binary or its table cannot be read. Keeps
  // copies of the read-only segments only.
  static std::unique_ptr<GoTable> from_elf(std::span<const uint8_t> file, std::string* error);
  // The table of `input`, copied.
  static std::unique_ptr<GoTable> from_pclntab(const PclntabInput& input, std::string* error);

  GoTable(const GoTable&) = delete;
  GoTable& operator=(const GoTable&) = delete;
  ~GoTable();

  PclntabFormat format() const;
  size_t function_count() const;
  // [text_begin, text_end): the pcs the table covers.
  uint64_t text_begin() const;
  uint64_t text_end() const;
  // Whether inline trees are read (the 1.18+ formats need go:func.*).
  bool has_inline_trees() const;

  // The index-th function in pc order (index < function_count()); nullopt when its record
  // cannot be read or has no name.
  std::optional<GoFunction> function(size_t index) const;
  // The function whose code holds `pc`, or nullopt (outside the table, or an entry without
  // a name: code from C objects linked in).
  std::optional<GoFunction> function_at(uint64_t pc) const;
  // The frames at `pc`, outermost first: the function, then each call inlined into it down
  // to the code at `pc`. Empty when function_at is nullopt.
  std::vector<GoFrame> frames_at(uint64_t pc) const;
  // The frames of the index-th function (as function()): nullopt when its record or its
  // pcsp table cannot be read.
  std::optional<FrameLayout> frame_layout(size_t index) const;
  // Whether a stack whose outermost frame is at `pc` is complete: a goroutine's or thread's
  // first function (goexit, mstart, rt0_go, the entry point) or a root of the scheduler on the
  // system stack (mcall, morestack), and not a signal handler's trampoline or another switch of
  // stacks, where the frames below were not found. nullopt where function_at is (outside the
  // table, or code without a name).
  std::optional<bool> is_root_at(uint64_t pc) const;
  // The Go release that built the binary (from_elf: its .go.buildinfo or read-only data).
  std::optional<GoRelease> release() const;

  struct State;

 private:
  explicit GoTable(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace bpfprof::go
