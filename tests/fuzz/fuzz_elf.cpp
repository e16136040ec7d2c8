// libFuzzer targets for binary input (FUZZ_TARGET selects):
//  4: an arbitrary file opened as ELF (build-id note, program headers, .symtab/.dynsym, the
//     span of a prefix's functions read in chunks) and
//     through libdwfl (DWARF functions, inline chains, symbol tables);
//  5: the DWARF unwinder: input = [u32 ELF size][ELF][ip][sp][bp][stack bytes]; the ELF is
//     mapped into a made-up process and the registers and stack are unwound with its CFI.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "symbols/dwarf/dwarf_module.h"
#include "symbols/dwarf/unwind_table.h"
#include "symbols/dwarf/unwinder.h"
#include "symbols/elf/elf_file.h"
#include "symbols/elf/symbol_span.h"

using namespace bpfprof;

namespace {

// The input as a file that libelf/libdwfl can open by path.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) : fd_(memfd_create("fuzz-elf", MFD_CLOEXEC)) {
    if (fd_ >= 0 && size) {
      ssize_t ignored = write(fd_, data, size);
      (void)ignored;
    }
  }
  ~MemoryFile() {
    if (fd_ >= 0) close(fd_);
  }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
#if FUZZ_TARGET == 4
  MemoryFile file(data, size);
  if (const int fd = open(file.path().c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    function_symbol_spans(fd, "_", 3, [](std::string_view name) {
      return name.ends_with("Handler") ? 0 : name.starts_with("_Interpreter") ? 1 : -1;
    });
    close(fd);
  }
  std::string error;
  if (auto elf = ElfFile::open(file.path(), &error)) {
    for (const LoadSegment& segment : elf->load_segments()) {
      elf->file_offset_to_vaddr(segment.file_offset);
      elf->lookup(segment.vaddr);
    }
    for (const Symbol& s : elf->symbols()) elf->lookup(s.address);
    const int fd = open(file.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      for (const LoadSegment& segment : elf->load_segments())
        read_code_bytes(fd, segment.vaddr, 4096);  // what /asm/v1 reads
      close(fd);
    }
  }
  if (auto dwarf = DwarfModule::open(file.path(), {})) {
    for (uint64_t vaddr : {uint64_t{0}, uint64_t{0x1000}, uint64_t{0x401000}}) {
      dwarf->functions_at(vaddr);
      dwarf->symbol_at(vaddr);
    }
  }
  build_unwind_table(file.path());  // CFI rows, crt stubs, coverage of the sections
#elif FUZZ_TARGET == 5
  uint32_t elf_size = 0;
  if (size < sizeof(elf_size) + 24) return 0;
  memcpy(&elf_size, data, sizeof(elf_size));
  data += sizeof(elf_size);
  size -= sizeof(elf_size);
  if (elf_size > size - 24) return 0;
  MemoryFile file(data, elf_size);
  uint64_t ip_sp_bp[3];
  memcpy(ip_sp_bp, data + elf_size, sizeof ip_sp_bp);
  const UserRegisters registers =
      UserRegisters::with_ip_sp_bp(ip_sp_bp[0], ip_sp_bp[1], ip_sp_bp[2]);
  const uint8_t* stack = data + elf_size + 24;
  const size_t stack_size = size - elf_size - 24;
  DwarfUnwinder unwinder;
  constexpr int kPid = 4242;
  unwinder.add_mapping(kPid, 0x400000, 0x400000 + (elf_size + 0xfff) / 0x1000 * 0x1000 + 0x1000, 0,
                       MappedFile{file.path(), nullptr});
  UnwoundStack unwound = unwinder.unwind(kPid, kPid, registers, stack, stack_size, 64);
  if (unwound.pcs.size() > 64 + 1) abort();
#else
#error "FUZZ_TARGET must be 4 (ELF/DWARF) or 5 (unwinder)"
#endif
  return 0;
}
