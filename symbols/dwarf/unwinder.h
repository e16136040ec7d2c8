// Unwinds user stacks from a sample's registers and a copy of the top of its stack, with the
// call-frame information (.eh_frame, .debug_frame) of the mapped ELF files, through libdwfl;
// libdwfl falls back to the frame pointer where a file has no CFI. One libdwfl session per
// process, rebuilt when its mappings change, so CFI is parsed once per file and process.
#pragma once

#include <elfutils/libdwfl.h>

#include <sys/types.h>
#include <cstdint>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "symbols/dwarf/x86_64_registers.h"
#include "symbols/util/held_file.h"
#include "symbols/util/mapping_ranges.h"

namespace bpfprof {

// A thread's user registers, in x86-64's DWARF numbering (x86_64_registers.h): every one is
// given to libdwfl, as CFI rules may use any (the PLT's CFA is computed from rip).
struct UserRegisters {
  static constexpr int kCount = kDwarfUserRegisters;
  static constexpr int kAx = kDwarfRax;
  static constexpr int kBp = kDwarfRbp;
  static constexpr int kSp = kDwarfRsp;
  static constexpr int kIp = kDwarfRip;
  std::array<uint64_t, kCount> dwarf{};

  uint64_t ax() const { return dwarf[kAx]; }
  uint64_t ip() const { return dwarf[kIp]; }
  uint64_t sp() const { return dwarf[kSp]; }
  uint64_t bp() const { return dwarf[kBp]; }
  static UserRegisters with_ip_sp_bp(uint64_t ip, uint64_t sp, uint64_t bp) {
    UserRegisters r;
    r.dwarf[kIp] = ip;
    r.dwarf[kSp] = sp;
    r.dwarf[kBp] = bp;
    return r;
  }
};

// Whether the stack reaches a thread root is not decided here: libdwfl reports an
// "outermost" frame also when a read falls outside the copied bytes. The output decides it
// from the frames themselves (Symbolizer::is_thread_root).
struct UnwoundStack {
  std::vector<uint64_t> pcs;  // innermost first: the sampled ip, then return addresses
  // Non-zero when the CFI asked for stack bytes above the copied ones: how many bytes from
  // sp the copy would have needed for that read.
  uint64_t stack_bytes_needed = 0;
};

class DwarfUnwinder {
 public:
  DwarfUnwinder();
  ~DwarfUnwinder();
  DwarfUnwinder(const DwarfUnwinder&) = delete;
  DwarfUnwinder& operator=(const DwarfUnwinder&) = delete;

  // The executable mappings of each process, kept current as the recording goes on. The
  // unwinder holds `file` (a held file stays open) while a mapping refers to it.
  void add_mapping(int pid, uint64_t start, uint64_t end, uint64_t file_offset, MappedFile file);
  void reset(int pid);                       // exec: a new address space
  void copy(int parent_pid, int child_pid);  // fork
  void remove(int pid);                      // the process is gone

  UnwoundStack unwind(int pid, int tid, const UserRegisters& registers, const uint8_t* stack,
                      size_t stack_size, size_t max_frames);

 private:
  struct Mapping {
    uint64_t start;
    uint64_t end;
    uint64_t file_offset;
    MappedFile file;
  };
  struct Process;
  Process* session_for(int pid);

  std::unordered_map<int, AddressSpaceOf<Mapping>> mappings_;
  std::unordered_map<int, std::unique_ptr<Process>> sessions_;
  uint64_t session_uses_ = 0;  // orders sessions by last use (the least recent is evicted)

  // The virtual address of a file offset, per version of the file (path, device, inode,
  // size, modification time) and offset.
  using FileVersionOffset =
      std::tuple<std::string, dev_t, ino_t, off_t, int64_t, int64_t, uint64_t>;
  std::map<FileVersionOffset, uint64_t> vaddr_cache_;
  std::optional<uint64_t> vaddr_of_file_offset(const std::string& file, uint64_t file_offset);
};

}  // namespace bpfprof
