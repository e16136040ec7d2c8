#include "symbols/symbolizer.h"

#include "symbols/demangle.h"
#include "symbols/util/debug_dirs.h"
#include "symbols/util/held_file.h"
#include "symbols/util/proc_maps.h"
#include "symbols/util/text.h"
#include "symbols/util/untrusted_file.h"

#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace bpfprof {

namespace {

std::string machine_arch() {
  utsname u{};
  return uname(&u) == 0 ? std::string(u.machine) : std::string();
}

// The frames Go's tables give at `vaddr` (outermost first), each with the Go function that
// holds the code as its symbol; empty when the tables do not cover it (C code linked in).
std::vector<SymbolizedFrame> go_frames_at(const go::GoTable& table, const ElfFile& elf,
                                          uint64_t vaddr) {
  std::optional<go::GoFunction> function = table.function_at(vaddr);
  if (!function) return {};
  const uint64_t base = elf.base_vaddr();
  NativeSymbolInfo symbol{std::string(function->name), function->entry - base,
                          function->end - function->entry};
  std::vector<SymbolizedFrame> frames;
  for (go::GoFrame& go_frame : table.frames_at(vaddr)) {
    SymbolizedFrame f;
    f.name = std::move(go_frame.function);
    f.relative_address = vaddr - base;
    if (!go_frame.file.empty()) f.file = std::move(go_frame.file);
    if (go_frame.line) f.line = go_frame.line;
    f.inline_depth = static_cast<uint32_t>(frames.size());
    f.symbol = symbol;
    frames.push_back(std::move(f));
  }
  return frames;
}

}  // namespace

std::unique_ptr<go::GoTable> load_go_table(const std::string& path, std::string_view required) {
  // Go binaries run to a few hundred MB; a larger file claiming to be one is not read.
  constexpr uint64_t kMaxGoBinaryBytes = uint64_t{1} << 30;
  UntrustedOpen opened = open_untrusted(path, UntrustedKind::kBinary);
  if (!opened.fd || opened.size == 0 || opened.size > kMaxGoBinaryBytes) return nullptr;
  void* mapped = mmap(nullptr, opened.size, PROT_READ, MAP_PRIVATE, opened.fd.get(), 0);
  if (mapped == MAP_FAILED) return nullptr;
  const std::string_view bytes(static_cast<const char*>(mapped), opened.size);
  std::unique_ptr<go::GoTable> table;
  if (required.empty() || bytes.find(required) != std::string_view::npos)
    table = go::GoTable::from_elf({static_cast<const uint8_t*>(mapped), opened.size}, nullptr);
  munmap(mapped, opened.size);
  return table;
}

std::string breakpad_id_from_build_id(const std::vector<uint8_t>& build_id) {
  if (build_id.empty()) return {};
  uint8_t guid[16] = {};
  for (size_t i = 0; i < 16 && i < build_id.size(); ++i) guid[i] = build_id[i];
  // Data1 (4 bytes), Data2 and Data3 (2 bytes each) are little-endian in a GUID.
  const int order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
  static const char digits[] = "0123456789ABCDEF";
  std::string out;
  for (int i : order) {
    out.push_back(digits[guid[i] >> 4]);
    out.push_back(digits[guid[i] & 15]);
  }
  return out + "0";
}

std::vector<uint8_t> kernel_build_id() {
  std::ifstream in("/sys/kernel/notes", std::ios::binary);
  std::vector<uint8_t> notes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  size_t pos = 0;
  auto align4 = [](size_t n) { return (n + 3) & ~size_t{3}; };
  while (pos + 12 <= notes.size()) {
    uint32_t namesz, descsz, type;
    memcpy(&namesz, &notes[pos], 4);
    memcpy(&descsz, &notes[pos + 4], 4);
    memcpy(&type, &notes[pos + 8], 4);
    size_t name_at = pos + 12, desc_at = name_at + align4(namesz);
    if (desc_at + descsz > notes.size()) break;
    constexpr uint32_t kGnuBuildId = 3;
    if (type == kGnuBuildId && namesz == 4 && memcmp(&notes[name_at], "GNU", 4) == 0)
      return std::vector<uint8_t>(notes.begin() + desc_at, notes.begin() + desc_at + descsz);
    pos = desc_at + align4(descsz);
  }
  return {};
}

LibraryDescription Symbolizer::describe_library(const std::string& path,
                                                const std::string& readable_path,
                                                const std::string& reported_build_id) {
  LibraryDescription d;
  d.path = path;
  d.name = base_name(path);
  d.debug_path = path;
  d.debug_name = d.name;
  d.arch = machine_arch();
  std::vector<uint8_t> build_id(reported_build_id.begin(), reported_build_id.end());
  if (build_id.empty()) {
    if (auto elf = elf_cache_.get(bpfprof::readable_path(readable_path, nullptr)))
      build_id = elf->build_id();
  }
  d.code_id = hex_string(build_id);
  d.breakpad_id = breakpad_id_from_build_id(build_id);
  if (const DwarfModule* dwarf = dwarf_for(readable_path); dwarf && !dwarf->debug_file().empty()) {
    d.debug_path = dwarf->debug_file();
    d.debug_name = base_name(d.debug_path);
  }
  return d;
}

LibraryDescription Symbolizer::describe_kernel() {
  LibraryDescription d;
  d.name = d.path = d.debug_name = d.debug_path = "[kernel.kallsyms]";
  d.arch = machine_arch();
  std::vector<uint8_t> build_id = kernel_build_id();
  d.code_id = hex_string(build_id);
  d.breakpad_id = breakpad_id_from_build_id(build_id);
  return d;
}

Symbolizer::Symbolizer(SymbolizerOptions options) : options_(std::move(options)) {}
Symbolizer::~Symbolizer() = default;

const DwarfModule* Symbolizer::dwarf_for(const std::string& path) {
  auto [it, inserted] = dwarf_modules_.try_emplace(path);
  if (inserted) it->second = DwarfModule::open(path, options_.symbol_dirs);
  return it->second.get();
}

const go::GoTable* Symbolizer::go_table_for(const std::string& path, const ElfFile& elf) {
  if (!elf.is_go()) return nullptr;
  auto [it, inserted] = go_tables_.try_emplace(path);
  if (inserted) it->second = load_go_table(path);
  return it->second.get();
}

std::vector<SymbolizedFrame> Symbolizer::symbolize_in_file(const std::string& library_path,
                                                           uint64_t file_offset) {
  const std::string& path = readable_path(library_path, nullptr);
  SymbolizedFrame unread;
  unread.relative_address = file_offset;  // right for most PIE/.so segments when unreadable
  std::shared_ptr<const ElfFile> elf = elf_cache_.get(path);
  if (!elf) return {unread};
  std::optional<uint64_t> vaddr = elf->file_offset_to_vaddr(file_offset);
  if (!vaddr) return {unread};
  return symbolize_vaddr(path, elf, *vaddr);
}

std::vector<SymbolizedFrame> Symbolizer::symbolize_relative(const std::string& library_path,
                                                            uint64_t relative) {
  const std::string& path = readable_path(library_path, nullptr);
  std::shared_ptr<const ElfFile> elf = elf_cache_.get(path);
  if (!elf) {
    SymbolizedFrame unread;
    unread.relative_address = relative;
    return {unread};
  }
  return symbolize_vaddr(path, elf, relative + elf->base_vaddr());
}

std::vector<SymbolizedFrame> Symbolizer::symbolize_vaddr(const std::string& path,
                                                         const std::shared_ptr<const ElfFile>& elf,
                                                         uint64_t vaddr) {
  // Go's own tables first: they name Go code as the Go toolchain does, inlined calls
  // included, where a stripped binary's ELF symbols would stretch _start over all of it.
  if (const go::GoTable* go = go_table_for(path, *elf)) {
    std::vector<SymbolizedFrame> frames = go_frames_at(*go, *elf, vaddr);
    if (!frames.empty()) return frames;
  }
  SymbolizedFrame outer;
  outer.relative_address = vaddr - elf->base_vaddr();
  const DwarfModule* dwarf = dwarf_for(path);
  outer.symbol = native_symbol_at(elf, dwarf, vaddr, &outer.named_by_address);
  if (outer.symbol) outer.name = outer.symbol->name;
  std::vector<SourceFunction> functions;
  if (dwarf) functions = dwarf->functions_at(vaddr);
  if (functions.empty()) return {outer};

  std::vector<SymbolizedFrame> frames;
  for (size_t depth = 0; depth < functions.size(); ++depth) {
    SymbolizedFrame f = outer;
    f.name = demangle(functions[depth].name);
    f.file = functions[depth].file;
    f.line = functions[depth].line;
    f.inline_depth = static_cast<uint32_t>(depth);
    f.named_by_address = false;  // DWARF names it
    frames.push_back(std::move(f));
  }
  return frames;
}

bool Symbolizer::is_thread_root(const std::string& library_path, uint64_t file_offset) {
  const std::string& path = readable_path(library_path, nullptr);
  std::shared_ptr<const ElfFile> elf = elf_cache_.get(path);
  std::optional<uint64_t> vaddr = elf ? elf->file_offset_to_vaddr(file_offset) : std::nullopt;
  if (!vaddr) return false;
  // Go code: a goroutine's or thread's first function, or the scheduler's root.
  if (const go::GoTable* go = go_table_for(path, *elf))
    if (std::optional<bool> root = go->is_root_at(*vaddr)) return *root;
  const DwarfModule* dwarf = dwarf_for(path);
  return dwarf && dwarf->is_thread_root(*vaddr);
}

std::optional<NativeSymbolInfo> Symbolizer::native_symbol_at(
    const std::shared_ptr<const ElfFile>& binary, const DwarfModule* dwarf, uint64_t vaddr,
    bool* named_by_address) {
  const CodeRange* cfi_function = dwarf ? dwarf->cfi_function_at(vaddr) : nullptr;
  // The symbol table (a debug file's when the binary has none), the binary's own PLT and
  // entry-point names, then libdwfl's tables (MiniDebugInfo).
  for (const Symbol* symbol : {symbol_source_for(binary).lookup(vaddr), binary->lookup(vaddr),
                               dwarf ? dwarf->symbol_at(vaddr) : nullptr}) {
    // A size-0 symbol widened to the next one stops where the CFI says another function
    // starts: stripped executables' few exported symbols would otherwise cover megabytes.
    if (!symbol || (symbol->widened && cfi_function && cfi_function->start > symbol->address))
      continue;
    uint64_t size = symbol->size;
    if (symbol->widened && dwarf) {
      // It also stops where its own FDE ends: code after it without CFI (crtstuff's functions
      // after _start) is not its.
      const CodeRange* own = dwarf->cfi_function_at(symbol->address);
      if (own && own->start == symbol->address) {
        if (vaddr >= own->end) continue;
        size = std::min(size, own->end - own->start);
      }
    }
    return NativeSymbolInfo{demangle(symbol->name), symbol->address - binary->base_vaddr(), size};
  }
  if (!cfi_function) return std::nullopt;
  *named_by_address = true;
  char name[32];
  snprintf(name, sizeof name, "fn_0x%llx", static_cast<unsigned long long>(cfi_function->start));
  return NativeSymbolInfo{name, cfi_function->start - binary->base_vaddr(),
                          cfi_function->end - cfi_function->start};
}

const ElfFile& Symbolizer::symbol_source_for(const std::shared_ptr<const ElfFile>& binary) {
  auto [it, inserted] = symbol_sources_.try_emplace(binary.get(), binary);
  if (!inserted || binary->symbol_source() == "symtab" || binary->build_id().size() <= 1)
    return *it->second;
  // Where DWARF's debug files are looked for by build-id: /usr/lib/debug, then each
  // --symbol-dir (a debug file may hold just .symtab, which libdwfl does not report).
  for (const std::string& path :
       build_id_paths(hex_string(binary->build_id()), options_.symbol_dirs)) {
    std::shared_ptr<const ElfFile> debug = elf_cache_.get(path);
    if (debug && debug->build_id() == binary->build_id() && !debug->symbols().empty()) {
      it->second = debug;
      break;
    }
  }
  return *it->second;
}

void Symbolizer::prepare_kernel(std::vector<uint64_t> addresses) {
  if (kernel_symbols_loaded_ || addresses.empty()) return;
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  kernel_addresses_ = std::move(addresses);
  load_kernel_symbols(kernel_addresses_);
}

const KernelSymbols* Symbolizer::kernel_symbols(std::optional<uint64_t> address) {
  // Loaded for other addresses than this one: all of them now.
  if (address && !kernel_addresses_.empty() &&
      !std::binary_search(kernel_addresses_.begin(), kernel_addresses_.end(), *address)) {
    kernel_addresses_.clear();
    kernel_symbols_loaded_ = false;
  }
  if (!kernel_symbols_loaded_) load_kernel_symbols({});
  return kernel_symbols_ && !kernel_symbols_->addresses_hidden() ? &*kernel_symbols_ : nullptr;
}

void Symbolizer::load_kernel_symbols(std::span<const uint64_t> wanted) {
  const bool said_hidden = kernel_symbols_ && kernel_symbols_->addresses_hidden();
  kernel_symbols_loaded_ = true;
  kernel_symbols_ = KernelSymbols::load(options_.kallsyms_path, wanted);
  if (kernel_symbols_ && kernel_symbols_->addresses_hidden() && !said_hidden)
    fprintf(stderr,
            "bpfprof: kernel addresses are hidden (kernel.kptr_restrict); kernel frames are "
            "named [kernel]\n");
}

std::vector<SymbolizedFrame> Symbolizer::symbolize_jit(int pid, uint32_t owner_uid,
                                                       uint64_t address) {
  auto [it, inserted] = perf_maps_.try_emplace(pid);
  if (inserted) it->second = PerfMap::load("/tmp/perf-" + std::to_string(pid) + ".map", owner_uid);
  SymbolizedFrame frame;
  frame.relative_address = address;
  if (it->second) {
    if (const PerfMapEntry* entry = it->second->lookup(address)) {
      frame.name = demangle(entry->name);
      frame.symbol = NativeSymbolInfo{frame.name, entry->start, entry->size};
    }
  }
  return {frame};
}

std::vector<SymbolizedFrame> Symbolizer::symbolize_kernel_relative(const std::string& module,
                                                                   uint64_t relative) {
  const KernelSymbols* symbols = kernel_symbols();
  uint64_t base = symbols ? symbols->text_start() : 0;
  if (symbols && !module.empty()) {
    const std::optional<uint64_t> module_base = symbols->module_base(module);
    if (!module_base) {
      SymbolizedFrame unknown;
      unknown.relative_address = relative;
      return {unknown};
    }
    base = *module_base;
  }
  return symbolize_kernel(base + relative);
}

std::vector<SymbolizedFrame> Symbolizer::symbolize_kernel(uint64_t address) {
  SymbolizedFrame frame;
  const KernelSymbols* symbols = kernel_symbols(address);
  if (!symbols) {
    frame.relative_address = address;
    frame.name = "[kernel]";
    return {frame};
  }
  const std::optional<KernelSymbol> symbol = symbols->lookup(address);
  uint64_t base = symbols->text_start();
  if (symbol && !symbol->module.empty()) {
    frame.kernel_module = symbol->module;
    base = symbols->module_base(symbol->module).value_or(base);
  }
  frame.relative_address = address - base;
  if (symbol) {
    frame.name = symbol->name;
    frame.symbol =
        NativeSymbolInfo{std::string(symbol->name), symbol->address - base,
                         symbol->end > symbol->address ? symbol->end - symbol->address : 0};
  }
  return {frame};
}

}  // namespace bpfprof
