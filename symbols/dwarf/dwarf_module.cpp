#include "symbols/dwarf/dwarf_module.h"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/dwarf/crt_stubs.h"
#include "symbols/elf/elf_file.h"
#include "symbols/elf/symbol_table.h"
#include "symbols/util/crc32.h"
#include "symbols/util/debug_dirs.h"
#include "symbols/util/text.h"
#include "symbols/util/untrusted_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace bpfprof {

namespace {

// The CRC-32 that .gnu_debuglink records for its debug file.
uint32_t file_crc32(int fd) {
  uint32_t crc = 0;
  unsigned char buf[65536];
  ssize_t n;
  off_t offset = 0;
  while ((n = pread(fd, buf, sizeof(buf), offset)) > 0) {
    crc = crc32_of(buf, static_cast<size_t>(n), crc);
    offset += n;
  }
  return crc;
}

std::optional<std::string> string_attribute(Dwarf_Die* die, unsigned int name) {
  Dwarf_Attribute attribute;
  if (!dwarf_attr_integrate(die, name, &attribute)) return std::nullopt;
  const char* s = dwarf_formstring(&attribute);
  return s ? std::optional<std::string>(s) : std::nullopt;
}

std::string function_name(Dwarf_Die* die) {
  if (auto linkage = string_attribute(die, DW_AT_linkage_name)) return *linkage;
  if (auto linkage = string_attribute(die, DW_AT_MIPS_linkage_name)) return *linkage;
  if (auto name = string_attribute(die, DW_AT_name)) return *name;
  return "??";
}

// A source file as a reader can open it: DWARF names a file compiled by a relative path
// relative to the compilation directory, which is then put in front of it (nothing else
// changes: the name stays the one DWARF gives).
std::string source_path(const char* file, const char* comp_dir) {
  if (file[0] == '/' || comp_dir == nullptr || comp_dir[0] == '\0') return file;
  std::string path = comp_dir;
  if (path.back() != '/') path += '/';
  return path + file;
}

// Where a function was inlined from: the call site recorded on its inlined_subroutine DIE.
void call_site(Dwarf_Die* inlined, Dwarf_Die* cu, SourceFunction& caller) {
  Dwarf_Attribute attribute;
  Dwarf_Word value;
  if (dwarf_attr(inlined, DW_AT_call_line, &attribute) && dwarf_formudata(&attribute, &value) == 0)
    caller.line = static_cast<uint32_t>(value);
  if (dwarf_attr(inlined, DW_AT_call_file, &attribute) &&
      dwarf_formudata(&attribute, &value) == 0) {
    Dwarf_Files* files;
    size_t count;
    if (dwarf_getsrcfiles(cu, &files, &count) == 0 && value < count) {
      const std::optional<std::string> comp_dir = string_attribute(cu, DW_AT_comp_dir);
      if (const char* file = dwarf_filesrc(files, value, nullptr, nullptr))
        caller.file = source_path(file, comp_dir ? comp_dir->c_str() : nullptr);
    }
  }
}

}  // namespace

// libdwfl's standard search (build-id trees, then the debuglink next to the binary, in its
// .debug/ and under the debug roots), with every candidate opened as an untrusted file: a
// FIFO or link planted next to a user's binary must neither block nor be read. A candidate
// must carry the binary's build-id (or, without one, the debuglink's CRC).
int find_debug_file(Dwfl_Module* module, const std::vector<std::string>& symbol_dirs,
                    const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                    char** debuginfo_file_name) {
  *debuginfo_file_name = nullptr;
  const unsigned char* id_bits = nullptr;
  GElf_Addr id_vaddr = 0;
  const int id_size = dwfl_module_build_id(module, &id_bits, &id_vaddr);
  const std::vector<uint8_t> build_id(id_bits, id_bits + std::max(id_size, 0));
  struct stat binary {};
  const bool binary_known = file_name && stat(file_name, &binary) == 0;
  auto take = [&](const std::string& candidate) -> int {
    UntrustedOpen file = open_untrusted(candidate, UntrustedKind::kDebugFile);
    struct stat st {};
    if (!file.fd || fstat(file.fd.get(), &st) != 0) return -1;
    if (binary_known && st.st_dev == binary.st_dev && st.st_ino == binary.st_ino) return -1;
    if (!build_id.empty() ? read_elf_build_id(file.fd.get()) != build_id
                          : debuglink_crc != 0 && file_crc32(file.fd.get()) != debuglink_crc)
      return -1;
    *debuginfo_file_name = strdup(candidate.c_str());
    return file.fd.release();
  };
  std::vector<std::string> candidates;
  if (!build_id.empty()) candidates = build_id_paths(hex_string(build_id), symbol_dirs);
  if (debuglink_file && !strchr(debuglink_file, '/')) {
    const std::string name = debuglink_file;
    const std::string dir = file_name ? directory_name(file_name) : std::string();
    if (!dir.empty()) {
      candidates.push_back(dir + "/" + name);
      candidates.push_back(dir + "/.debug/" + name);
      for (const std::string& root : debug_roots(symbol_dirs))
        candidates.push_back(root + dir + "/" + name);
    }
    for (const std::string& root : symbol_dirs) candidates.push_back(root + "/" + name);
  }
  for (const std::string& candidate : candidates)
    if (const int fd = take(candidate); fd >= 0) return fd;
  // Then the debuginfod servers of $DEBUGINFOD_URLS, through libdwfl: without a file name it
  // looks only in /usr/lib/debug's build-id tree (root's) before asking them.
  const char* servers = std::getenv("DEBUGINFOD_URLS");
  if (build_id.empty() || !servers || !*servers) return -1;
  void* no_userdata = nullptr;
  errno = 0;
  const int fd = dwfl_standard_find_debuginfo(module, &no_userdata, nullptr, 0, nullptr, nullptr, 0,
                                              debuginfo_file_name);
  if (fd >= 0) return fd;
  // The standard search can leave a name behind when it finds nothing; nobody frees it
  // then (found by tests/fuzz: fuzz_elf, a file with a .gnu_debuglink).
  free(*debuginfo_file_name);
  *debuginfo_file_name = nullptr;
  return -1;
}

UniqueFd elf_descriptor_for_libdwfl(const std::string& path, int fd) {
  UniqueFd own = fd >= 0 ? UniqueFd(fcntl(fd, F_DUPFD_CLOEXEC, 0))
                         : open_untrusted(path, UntrustedKind::kBinary).fd;
  char magic[SELFMAG];
  if (!own || pread(own.get(), magic, SELFMAG, 0) != SELFMAG || memcmp(magic, ELFMAG, SELFMAG) != 0)
    return {};
  return own;
}

int DwarfModule::find_debuginfo(Dwfl_Module* module, void** userdata, const char* /*module_name*/,
                                Dwarf_Addr /*base*/, const char* file_name,
                                const char* debuglink_file, GElf_Word debuglink_crc,
                                char** debuginfo_file_name) {
  const auto* self = static_cast<const DwarfModule*>(*userdata);
  return find_debug_file(module, self ? self->symbol_dirs_ : std::vector<std::string>{}, file_name,
                         debuglink_file, debuglink_crc, debuginfo_file_name);
}

std::unique_ptr<DwarfModule> DwarfModule::open(const std::string& path,
                                               const std::vector<std::string>& symbol_dirs, int fd,
                                               DwarfUse use) {
  std::unique_ptr<DwarfModule> m(new DwarfModule());
  m->symbol_dirs_ = symbol_dirs;
  m->path_ = path;
  m->use_ = use;
  m->callbacks_.find_elf = dwfl_build_id_find_elf;
  m->callbacks_.find_debuginfo = &DwarfModule::find_debuginfo;
  m->callbacks_.section_address = dwfl_offline_section_address;
  m->dwfl_ = dwfl_begin(&m->callbacks_);
  if (!m->dwfl_) return nullptr;
  dwfl_report_begin(m->dwfl_);
  // libdwfl never opens the path itself.
  UniqueFd own_fd = elf_descriptor_for_libdwfl(path, fd);
  if (!own_fd) return nullptr;
  m->module_ = dwfl_report_offline(m->dwfl_, path.c_str(), path.c_str(), own_fd.get());
  dwfl_report_end(m->dwfl_, nullptr, nullptr);
  if (!m->module_) return nullptr;
  own_fd.release();  // libdwfl's now
  // find_debuginfo reaches its DwarfModule through the module's userdata.
  void** userdata = nullptr;
  dwfl_module_info(m->module_, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  if (userdata) *userdata = m.get();
  GElf_Addr bias = 0;
  if (!dwfl_module_getelf(m->module_, &bias)) return nullptr;
  m->bias_ = bias;
  Dwarf_Addr dwarf_bias;
  if (use == DwarfUse::kSymbols && dwfl_module_getdwarf(m->module_, &dwarf_bias)) {
    const char* debug_file = nullptr;
    dwfl_module_info(m->module_, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &debug_file);
    if (debug_file) m->debug_file_ = debug_file;
  }
  return m;
}

DwarfModule::~DwarfModule() {
  if (dwfl_) dwfl_end(dwfl_);
}

namespace {

// Collects the concrete functions (with code) below `die`, through namespaces and classes.
void collect_function_ranges(Dwarf_Die* die, std::vector<DwarfModule::FunctionRangeEntry>& out,
                             int depth) {
  Dwarf_Die child;
  if (depth > 16 || dwarf_child(die, &child) != 0) return;
  do {
    int tag = dwarf_tag(&child);
    if (tag == DW_TAG_subprogram) {
      Dwarf_Addr base, low, high;
      ptrdiff_t offset = 0;
      while ((offset = dwarf_ranges(&child, offset, &base, &low, &high)) > 0)
        if (high > low) out.push_back({low, high, dwarf_dieoffset(&child)});
    } else if (tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
               tag == DW_TAG_structure_type || tag == DW_TAG_union_type || tag == DW_TAG_module) {
      collect_function_ranges(&child, out, depth + 1);
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

// The chain of scopes from `die` down to the innermost one containing `pc`.
void descend(Dwarf_Die* die, Dwarf_Addr pc, std::vector<Dwarf_Die>& path, int depth) {
  Dwarf_Die child;
  if (depth > 64 || dwarf_child(die, &child) != 0) return;
  do {
    int tag = dwarf_tag(&child);
    if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) &&
        dwarf_haspc(&child, pc) == 1) {
      if (tag == DW_TAG_inlined_subroutine) path.push_back(child);
      descend(&child, pc, path, depth + 1);
      return;
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

}  // namespace

const std::vector<Symbol>& DwarfModule::table_symbols() const {
  if (table_symbols_) return *table_symbols_;
  std::vector<SymbolEntry> entries;
  SymbolNameBudget names(1ull << 30);  // the table may come from another file: a fixed bound
  const int count = dwfl_module_getsymtab(module_);
  for (int i = 0; i < count; ++i) {
    GElf_Sym symbol;
    GElf_Addr address = 0;
    GElf_Word section_index = 0;
    Elf* elf = nullptr;
    const char* name =
        dwfl_module_getsym_info(module_, i, &symbol, &address, &section_index, &elf, nullptr);
    if (!name || !elf || address < bias_) continue;
    const std::optional<std::string_view> bounded = names.take(name);
    if (!bounded) break;
    auto entry = code_symbol_entry(elf, symbol, section_index, *bounded);
    if (!entry) continue;
    // The table's own addresses (its section's too) are moved to the file's.
    const uint64_t shift = address - bias_ - entry->address;
    entry->address += shift;
    if (entry->section_end) entry->section_end += shift;
    entries.push_back(std::move(*entry));
  }
  table_symbols_ = build_symbol_table(std::move(entries));
  return *table_symbols_;
}

const Symbol* DwarfModule::symbol_at(uint64_t vaddr) const {
  return find_symbol(table_symbols(), vaddr);
}

const CodeRange* DwarfModule::cfi_function_at(uint64_t vaddr) const {
  if (!cfi_functions_) {
    Elf* file = elf();
    cfi_functions_ = file ? read_cfi_functions(file) : std::vector<CodeRange>{};
  }
  return find_code_range(*cfi_functions_, vaddr);
}

const std::vector<DwarfModule::FunctionRange>& DwarfModule::function_ranges(Dwarf_Die* cu) const {
  auto [it, inserted] = function_ranges_.try_emplace(dwarf_dieoffset(cu));
  if (inserted) {
    std::vector<FunctionRangeEntry> entries;
    collect_function_ranges(cu, entries, 0);
    it->second.reserve(entries.size());
    for (const auto& e : entries) it->second.push_back({e.low, e.high, e.die});
    std::sort(it->second.begin(), it->second.end(),
              [](const auto& a, const auto& b) { return a.low < b.low; });
  }
  return it->second;
}

std::vector<SourceFunction> DwarfModule::functions_at(uint64_t vaddr) const {
  const Dwarf_Addr address = vaddr + bias_;
  Dwarf_Addr cu_bias = 0;
  Dwarf_Die* cu = dwfl_module_addrdie(module_, address, &cu_bias);
  if (!cu) return {};
  const Dwarf_Addr pc = address - cu_bias;
  Dwarf* dwarf = dwarf_cu_getdwarf(cu->cu);
  if (!dwarf) return {};

  // The function whose code holds pc (ranges sorted by start; functions do not overlap).
  const std::vector<FunctionRange>& ranges = function_ranges(cu);
  auto it = std::upper_bound(ranges.begin(), ranges.end(), pc,
                             [](Dwarf_Addr a, const FunctionRange& r) { return a < r.low; });
  std::vector<Dwarf_Die> path;  // the function, then each function inlined into the previous
  for (auto candidate = it; candidate != ranges.begin();) {
    --candidate;
    if (pc >= candidate->low && pc < candidate->high) {
      Dwarf_Die function;
      if (dwarf_offdie(dwarf, candidate->die, &function)) {
        path.push_back(function);
        descend(&function, pc, path, 0);
      }
      break;
    }
    if (it - candidate > 8) break;  // far before pc: no function holds it
  }
  if (path.empty()) return {};

  std::vector<SourceFunction> functions;
  for (size_t i = 0; i < path.size(); ++i) {
    SourceFunction f{function_name(&path[i]), std::nullopt, std::nullopt};
    if (i + 1 < path.size()) call_site(&path[i + 1], cu, f);  // where the next one was inlined
    functions.push_back(std::move(f));
  }
  // The innermost function's own line comes from the line table.
  if (Dwfl_Line* line = dwfl_module_getsrc(module_, address)) {
    int lineno = 0;
    if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
      functions.back().file = source_path(file, dwfl_line_comp_dir(line));
      if (lineno > 0) functions.back().line = static_cast<uint32_t>(lineno);
    }
  }
  return functions;
}

namespace {

// The frame's return-address rule is "undefined": nothing called it.
bool return_address_undefined(Dwarf_Frame* frame) {
  Dwarf_Addr start = 0, end = 0;
  bool signal_frame = false;
  const int return_address = dwarf_frame_info(frame, &start, &end, &signal_frame);
  Dwarf_Op ops_mem[3];
  Dwarf_Op* ops = nullptr;
  size_t op_count = 0;
  if (return_address < 0 ||
      dwarf_frame_register(frame, return_address, ops_mem, &ops, &op_count) != 0)
    return false;
  return op_count == 0 && ops == ops_mem;  // (a null ops would be "same value")
}

}  // namespace

Elf* DwarfModule::elf() const {
  GElf_Addr bias = 0;
  return dwfl_module_getelf(module_, &bias);
}

DwarfModule::CallFrameInfo DwarfModule::call_frame_info(CfiSection section) const {
  CallFrameInfo info;
  Dwarf_Addr cfi_bias = 0;
  if (section == CfiSection::kEhFrame) {
    info.cfi = dwfl_module_eh_cfi(module_, &cfi_bias);
    info.elf = elf();
  } else {
    info.cfi = dwfl_module_dwarf_cfi(module_, &cfi_bias);
    Dwarf_Addr dwarf_bias = 0;
    Dwarf* dwarf = dwfl_module_getdwarf(module_, &dwarf_bias);
    info.elf = dwarf != nullptr ? dwarf_getelf(dwarf) : nullptr;
  }
  if (info.cfi == nullptr || info.elf == nullptr) return {};
  // libdwfl address = CFI address + cfi_bias = file vaddr + bias_.
  info.cfi_minus_vaddr = bias_ - cfi_bias;
  return info;
}

DwarfModule::FrameFile DwarfModule::frame_file(CfiSection section) const {
  if (section == CfiSection::kDebugFrame && use_ == DwarfUse::kFrames) {
    if (!debug_frame_) debug_frame_ = DebugFrameFile::find(module_, elf(), path_, symbol_dirs_);
    return {debug_frame_->elf(), debug_frame_->cfi_minus_vaddr()};
  }
  const CallFrameInfo info = call_frame_info(section);
  return {info.elf, info.cfi_minus_vaddr};
}

std::optional<bool> DwarfModule::cfi_says_root(uint64_t vaddr) const {
  for (CfiSection section : {CfiSection::kEhFrame, CfiSection::kDebugFrame}) {
    const CallFrameInfo info = call_frame_info(section);
    Dwarf_Frame* frame = nullptr;
    if (!info.cfi || dwarf_cfi_addrframe(info.cfi, vaddr + info.cfi_minus_vaddr, &frame) != 0)
      continue;
    const bool root = return_address_undefined(frame);
    free(frame);
    return root;
  }
  return std::nullopt;
}

bool DwarfModule::is_thread_root(uint64_t vaddr) const {
  if (const std::optional<bool> root = cfi_says_root(vaddr)) return *root;
  // The entry stub without CFI (ld.so's _start). Where an FDE covers the entry, the bytes
  // after it are crtstuff's functions (deregister_tm_clones), not the stub: a leaf there
  // was taken for a root.
  const std::optional<EntryStub> stub = entry_stub(elf());
  if (stub && stub->contains(vaddr) && !cfi_says_root(stub->start).has_value()) return true;
  // A stack that ends here ends in clone's child: the parent's goes on to its caller (rax,
  // which tells the two apart in the kernel walk, is not needed for the outermost frame).
  return is_clone_child_start(elf(), vaddr);
}

}  // namespace bpfprof
