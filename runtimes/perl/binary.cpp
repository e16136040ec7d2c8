#include "runtimes/perl/binary.h"

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "symbols/elf/elf_file.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {
namespace {

// An executable's (a file with a program interpreter) PT_TLS program header, if it has one:
// a library's thread-locals are not at a fixed offset from the thread pointer.
std::optional<GElf_Phdr> executable_tls_header(int fd) {
  if (elf_version(EV_CURRENT) == EV_NONE) return std::nullopt;
  std::unique_ptr<Elf, decltype(&elf_end)> elf(elf_begin(fd, ELF_C_READ, nullptr), &elf_end);
  size_t count = 0;
  if (!elf || elf_getphdrnum(elf.get(), &count) != 0) return std::nullopt;
  std::optional<GElf_Phdr> tls;
  bool executable = false;
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr header;
    if (!gelf_getphdr(elf.get(), static_cast<int>(i), &header)) continue;
    if (header.p_type == PT_TLS) tls = header;
    executable |= header.p_type == PT_INTERP;
  }
  return executable ? tls : std::nullopt;
}

}  // namespace

bool is_perl_file_name(std::string_view base) {
  auto release = [](std::string_view rest) {
    return std::all_of(rest.begin(), rest.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
    });
  };
  if (base.starts_with("libperl.so")) return release(base.substr(10));
  return base.starts_with("perl") && release(base.substr(4));
}

const PerlLayout* perl_layout(const PerlVersion& version, uint16_t interp_size) {
  if (version.major == 5 && version.minor == 36 && interp_size == kPerl5_36.interp_size)
    return &kPerl5_36;
  return nullptr;
}

std::optional<int64_t> executable_tls_offset(uint64_t value, uint64_t size, uint64_t align) {
  if (align == 0 || (align & (align - 1)) || align > 4096 || size > (1 << 20) || value >= size)
    return std::nullopt;
  const uint64_t block = (size + align - 1) & ~(align - 1);
  return static_cast<int64_t>(value) - static_cast<int64_t>(block);
}

std::variant<PerlBinary, PerlRejection> inspect_perl_binary(const std::string& readable_path) {
  const UntrustedOpen opened = open_untrusted(readable_path, UntrustedKind::kBinary);
  if (!opened.fd) return PerlRejection{"perl: cannot read the binary"};
  const int fd = opened.fd.get();
  const auto symbols =
      read_dynamic_symbols(fd, {"PL_current_context", "PL_curinterp", "PL_revision", "PL_version",
                                "PL_subversion", "PL_interp_size", "Perl_runops_standard"});
  auto defined = [&](const char* name) -> const DynamicSymbol* {
    auto it = symbols.find(name);
    return it == symbols.end() || !it->second.defined ? nullptr : &it->second;
  };
  const DynamicSymbol* context = defined("PL_current_context");
  const DynamicSymbol* runops = defined("Perl_runops_standard");
  if (!context || !runops || !defined("PL_curinterp") || !defined("PL_revision") ||
      !defined("PL_version") || !defined("PL_subversion") || !defined("PL_interp_size"))
    return PerlRejection{"perl: not a threaded perl with its interpreter exported, subs not read"};
  std::string error;
  std::shared_ptr<const ElfFile> elf =
      ElfFile::open("/proc/self/fd/" + std::to_string(fd), &error, ElfContents::kLayout);
  if (!elf) return PerlRejection{"perl: " + error};
  uint8_t revision = 0, version = 0, subversion = 0;
  uint16_t interp_size = 0;
  if (!read_file_at_vaddr(fd, *elf, defined("PL_revision")->address, &revision, 1) ||
      !read_file_at_vaddr(fd, *elf, defined("PL_version")->address, &version, 1) ||
      !read_file_at_vaddr(fd, *elf, defined("PL_subversion")->address, &subversion, 1) ||
      !read_file_at_vaddr(fd, *elf, defined("PL_interp_size")->address, &interp_size, 2))
    return PerlRejection{"perl: its release cannot be read, subs not read"};
  const PerlVersion release{revision, version, subversion};
  const PerlLayout* layout = perl_layout(release, interp_size);
  if (!layout)
    return PerlRejection{"perl " + std::to_string(revision) + "." + std::to_string(version) +
                         ": no layout for this build, subs not read"};
  PerlBinary binary{.elf = elf,
                    .layout = layout,
                    .version = release,
                    .tls_offset = std::nullopt,
                    .curinterp = defined("PL_curinterp")->address,
                    .runops_start = runops->address,
                    .runops_end = runops->address + runops->size};
  if (const std::optional<GElf_Phdr> tls = executable_tls_header(fd))
    binary.tls_offset = executable_tls_offset(context->address, tls->p_memsz, tls->p_align);
  return binary;
}

}  // namespace bpfprof
