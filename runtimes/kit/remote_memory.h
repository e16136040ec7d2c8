// Another process's memory as the runtimes read it (docs/trust.md): untrusted input. Reads go
// through a RemoteReader, which counts the bytes against a budget and reads C strings bounded:
// a table that points anywhere, loops or never ends costs at most the budget. Many small
// pieces (one word of each frame's object) are read in one batch, one system call for a live
// process. The memory itself is an interface so that the unit tests and the fuzzer give bytes
// of their own to the same parsing code that reads a live process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "userspace/model/ids.h"

namespace bpfprof {

// One piece of a batch: `size` bytes at `address` into `out`.
struct MemoryPiece {
  uint64_t address;
  void* out;
  size_t size;
};
// Which pieces of a batch were read (in order: a batch stops at its first unreadable piece),
// and whether the process is gone (then none was).
struct BatchRead {
  std::vector<bool> read;
  bool process_gone = false;
};

class RemoteMemory {
 public:
  virtual ~RemoteMemory() = default;
  // Exactly `size` bytes at `address` into `out`; false when any of them cannot be read.
  virtual bool read(uint64_t address, void* out, size_t size) = 0;
  // The pieces in order, up to the first that cannot be read.
  virtual BatchRead read_batch(const std::vector<MemoryPiece>& pieces);
};

// A running process's memory, through process_vm_readv (no ptrace stop, no /proc/PID/mem
// file held open).
class ProcessMemory final : public RemoteMemory {
 public:
  explicit ProcessMemory(Pid pid) : pid_(pid) {}
  bool read(uint64_t address, void* out, size_t size) override;
  // One process_vm_readv for the whole batch.
  BatchRead read_batch(const std::vector<MemoryPiece>& pieces) override;
  // A read found the process gone (exited, or its memory released as it exits): what did
  // not read says nothing about its tables then.
  bool gone() const { return gone_; }

 private:
  Pid pid_;
  bool gone_ = false;
};

// Bytes placed at addresses of a pretend process: a fake JVM image for tests and the fuzzer.
// A read must lie within one placed region.
class BufferMemory final : public RemoteMemory {
 public:
  void place(uint64_t address, std::string bytes);
  bool read(uint64_t address, void* out, size_t size) override;

 private:
  std::map<uint64_t, std::string> regions_;  // by start address, not overlapping
};

enum class ReadFailure : uint8_t {
  kUnreadable,   // the memory is not there (unmapped, or the process is gone)
  kBudgetUsed,   // the reads would pass the byte budget
  kNotText,      // a C string longer than its bound, or with bytes that no name has
  kNullPointer,  // a pointer that must be set is 0
};
std::string_view read_failure_name(ReadFailure failure);

// Reads from a RemoteMemory within a budget of bytes, remembering why the last read failed.
class RemoteReader {
 public:
  RemoteReader(RemoteMemory& memory, uint64_t budget_bytes, size_t max_string_bytes)
      : memory_(memory), budget_(budget_bytes), max_string_(max_string_bytes) {}

  bool read(uint64_t address, void* out, size_t size);
  // The pieces as RemoteMemory::read_batch reads them, all counted against the budget: none
  // is read when they would pass it.
  BatchRead read_batch(const std::vector<MemoryPiece>& pieces);
  std::optional<uint64_t> word(uint64_t address);
  template <typename T>
  std::optional<T> value(uint64_t address) {
    T v{};
    if (!read(address, &v, sizeof(v))) return std::nullopt;
    return v;
  }
  // A NUL-terminated string of printable ASCII (names, C type strings) of at most
  // max_string_bytes including its NUL. Strings are kept by address: HotSpot's tables point
  // to the same literal many times.
  std::optional<std::string> c_string(uint64_t address);

  uint64_t bytes_read() const { return used_; }
  // Why the last failed read failed.
  std::optional<ReadFailure> failure() const { return failure_; }

 private:
  bool fail(ReadFailure failure);

  RemoteMemory& memory_;
  uint64_t budget_;
  size_t max_string_;
  uint64_t used_ = 0;
  std::optional<ReadFailure> failure_;
  std::unordered_map<uint64_t, std::string> strings_;
};

}  // namespace bpfprof
