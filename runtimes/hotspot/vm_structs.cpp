#include "runtimes/hotspot/vm_structs.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "symbols/elf/elf_file.h"
#include "symbols/util/proc_maps.h"
#include "symbols/util/text.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof::hotspot {

namespace {

constexpr std::array<std::string_view, kVmSymbolCount> kSymbolNames = {
    "gHotSpotVMStructs",
    "gHotSpotVMStructEntryTypeNameOffset",
    "gHotSpotVMStructEntryFieldNameOffset",
    "gHotSpotVMStructEntryTypeStringOffset",
    "gHotSpotVMStructEntryIsStaticOffset",
    "gHotSpotVMStructEntryOffsetOffset",
    "gHotSpotVMStructEntryAddressOffset",
    "gHotSpotVMStructEntryArrayStride",
    "gHotSpotVMTypes",
    "gHotSpotVMTypeEntryTypeNameOffset",
    "gHotSpotVMTypeEntrySuperclassNameOffset",
    "gHotSpotVMTypeEntrySizeOffset",
    "gHotSpotVMTypeEntryArrayStride",
    "gHotSpotVMIntConstants",
    "gHotSpotVMIntConstantEntryNameOffset",
    "gHotSpotVMIntConstantEntryValueOffset",
    "gHotSpotVMIntConstantEntryArrayStride",
    "gHotSpotVMLongConstants",
    "gHotSpotVMLongConstantEntryNameOffset",
    "gHotSpotVMLongConstantEntryValueOffset",
    "gHotSpotVMLongConstantEntryArrayStride",
};

std::string field_key(std::string_view type, std::string_view field) {
  std::string key;
  key.reserve(type.size() + 2 + field.size());
  key.append(type).append("::").append(field);
  return key;
}

// A member of a table entry: the symbol that says where it lies in the entry, and its size.
struct MemberSpec {
  VmSymbol offset_symbol;
  size_t size;
};

// One table: where its array is, how far apart its entries are, where each member lies.
struct TableLayout {
  const char* what = "";  // "field", "type", ... for messages
  uint64_t array = 0;
  uint64_t stride = 0;
  std::vector<uint64_t> members;  // in the order of the MemberSpecs; members[0] is the name
};

uint64_t entry_word(std::span<const uint8_t> entry, uint64_t offset, size_t size) {
  uint64_t value = 0;
  memcpy(&value, entry.data() + offset, size);  // offset + size <= stride, checked
  return value;
}

}  // namespace

std::string_view vm_symbol_name(VmSymbol symbol) {
  const auto index = static_cast<size_t>(symbol);
  return index < kSymbolNames.size() ? kSymbolNames[index] : "?";
}

const VmField* VmStructs::field(std::string_view type, std::string_view field) const {
  auto it = fields_.find(field_key(type, field));
  return it == fields_.end() ? nullptr : &it->second;
}

std::optional<uint64_t> VmStructs::offset_of(std::string_view type, std::string_view name) const {
  const VmField* f = field(type, name);
  if (!f || f->is_static) return std::nullopt;
  return f->offset;
}

std::optional<uint64_t> VmStructs::address_of(std::string_view type, std::string_view name) const {
  const VmField* f = field(type, name);
  if (!f || !f->is_static) return std::nullopt;
  return f->address;
}

const VmType* VmStructs::type(std::string_view name) const {
  auto it = types_.find(name);
  return it == types_.end() ? nullptr : &it->second;
}

std::optional<uint64_t> VmStructs::size_of(std::string_view name) const {
  const VmType* t = type(name);
  if (!t) return std::nullopt;
  return t->size;
}

std::optional<int32_t> VmStructs::int_constant(std::string_view name) const {
  auto it = int_constants_.find(name);
  if (it == int_constants_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint64_t> VmStructs::long_constant(std::string_view name) const {
  auto it = long_constants_.find(name);
  if (it == long_constants_.end()) return std::nullopt;
  return it->second;
}

// Reads the four tables into a VmStructs; the first problem ends it with an error.
class VmStructsParser {
 public:
  VmStructsParser(RemoteReader& reader, const VmSymbolAddresses& symbols,
                  const VmStructsLimits& limits)
      : reader_(reader), symbols_(symbols), limits_(limits) {}

  VmStructsResult parse();

 private:
  using Entry = std::span<const uint8_t>;
  // Returns false to end the table with the error in error_.
  using EntryFn = bool (VmStructsParser::*)(const TableLayout&, const Entry&, std::string name);

  std::optional<TableLayout> table_layout(const char* what, VmSymbol array, VmSymbol stride,
                                          std::initializer_list<MemberSpec> members);
  bool read_table(const TableLayout& table, EntryFn on_entry);
  size_t read_block(const TableLayout& table, size_t index, std::vector<uint8_t>& block);
  bool on_field(const TableLayout& table, const Entry& entry, std::string name);
  bool on_type(const TableLayout& table, const Entry& entry, std::string name);
  bool on_int_constant(const TableLayout& table, const Entry& entry, std::string name);
  bool on_long_constant(const TableLayout& table, const Entry& entry, std::string name);
  std::optional<std::string> optional_string(uint64_t address);
  bool fail(VmStructsFailure failure, std::string message);
  bool fail_read(const std::string& what);

  RemoteReader& reader_;
  const VmSymbolAddresses& symbols_;
  const VmStructsLimits& limits_;
  VmStructs out_;
  std::optional<VmStructsError> error_;
};

bool VmStructsParser::fail(VmStructsFailure failure, std::string message) {
  if (!error_) error_ = VmStructsError{failure, std::move(message)};
  return false;
}

bool VmStructsParser::fail_read(const std::string& what) {
  const ReadFailure why = reader_.failure().value_or(ReadFailure::kUnreadable);
  return fail(why == ReadFailure::kBudgetUsed ? VmStructsFailure::kBudgetUsed
                                              : VmStructsFailure::kUnreadable,
              what + ": " + std::string(read_failure_name(why)));
}

// The variables that say where a table is and how its entries are laid out: each must be
// readable and describe members inside an entry of a plausible size.
std::optional<TableLayout> VmStructsParser::table_layout(
    const char* what, VmSymbol array, VmSymbol stride, std::initializer_list<MemberSpec> members) {
  TableLayout table{what, 0, 0, {}};
  const std::optional<uint64_t> array_address = reader_.word(symbols_[array]);
  const std::optional<uint64_t> stride_value = reader_.word(symbols_[stride]);
  if (!array_address || !stride_value) {
    fail_read(std::string(what) + " table: " + std::string(vm_symbol_name(array)));
    return std::nullopt;
  }
  table.array = *array_address;
  table.stride = *stride_value;
  if (!table.array) {
    fail(VmStructsFailure::kUnreadable, std::string(what) +
                                            " table: " + std::string(vm_symbol_name(array)) +
                                            " is null (the JVM has not started?)");
    return std::nullopt;
  }
  // libjvm's C++ initializers set the layout variables, a table's stride after its offsets:
  // a zero stride is a JVM that has mapped libjvm but not run them yet (read again later).
  if (table.stride == 0) {
    fail(VmStructsFailure::kUnreadable,
         std::string(what) + " table: entry stride 0 (libjvm not initialized yet?)");
    return std::nullopt;
  }
  if (table.stride < 8 || table.stride > limits_.max_entry_stride) {
    fail(VmStructsFailure::kBadEntryLayout,
         std::string(what) + " table: entry stride " + std::to_string(table.stride));
    return std::nullopt;
  }
  for (const MemberSpec& member : members) {
    const std::optional<uint64_t> offset = reader_.word(symbols_[member.offset_symbol]);
    if (!offset) {
      fail_read(std::string(what) + " table: " + std::string(vm_symbol_name(member.offset_symbol)));
      return std::nullopt;
    }
    if (*offset > table.stride || table.stride - *offset < member.size) {
      fail(VmStructsFailure::kBadEntryLayout,
           std::string(vm_symbol_name(member.offset_symbol)) + " " + std::to_string(*offset) +
               " is outside an entry of " + std::to_string(table.stride) + " bytes");
      return std::nullopt;
    }
    table.members.push_back(*offset);
  }
  return table;
}

// Entries until the one whose name is null, which ends every table. They are read in blocks
// (one system call for many entries); a block that runs into unreadable memory past the
// table's end is read again entry by entry.
bool VmStructsParser::read_table(const TableLayout& table, EntryFn on_entry) {
  std::vector<uint8_t> block;
  size_t block_start = 0;
  size_t block_count = 0;
  for (size_t index = 0; index < limits_.max_entries; ++index) {
    const std::string where = std::string(table.what) + " entry " + std::to_string(index);
    if (index >= block_start + block_count) {
      block_start = index;
      block_count = read_block(table, index, block);
      if (!block_count) return fail_read(where);
    }
    const Entry entry(block.data() + (index - block_start) * table.stride, table.stride);
    const uint64_t name_address = entry_word(entry, table.members[0], 8);
    if (!name_address) return true;
    std::optional<std::string> name = reader_.c_string(name_address);
    if (!name) return fail_read(where + " name");
    if (!(this->*on_entry)(table, entry, std::move(*name))) return false;
  }
  return fail(VmStructsFailure::kTooMany, std::string(table.what) + " table: no end within " +
                                              std::to_string(limits_.max_entries) + " entries");
}

// Entries from `index` on into `block`: how many (0: not even one is readable).
size_t VmStructsParser::read_block(const TableLayout& table, size_t index,
                                   std::vector<uint8_t>& block) {
  constexpr size_t kBlockEntries = 32;
  const uint64_t address = table.array + index * table.stride;
  if (address < table.array) return 0;  // wrapped around
  for (size_t count = std::min(kBlockEntries, limits_.max_entries - index); count;
       count = count > 1 ? 1 : 0) {
    block.assign(count * table.stride, 0);
    if (reader_.read(address, block.data(), block.size())) return count;
    if (reader_.failure() == ReadFailure::kBudgetUsed) return 0;
  }
  return 0;
}

// A string a null pointer may stand for: empty then.
std::optional<std::string> VmStructsParser::optional_string(uint64_t address) {
  if (!address) return std::string();
  return reader_.c_string(address);
}

bool VmStructsParser::on_field(const TableLayout& table, const Entry& entry, std::string type) {
  const std::optional<std::string> field = reader_.c_string(entry_word(entry, table.members[1], 8));
  const std::optional<std::string> type_string =
      optional_string(entry_word(entry, table.members[2], 8));
  if (!field || !type_string) return fail_read("field entry of " + type + ": names");
  VmField value{*type_string, entry_word(entry, table.members[3], 4) != 0,
                entry_word(entry, table.members[4], 8), entry_word(entry, table.members[5], 8)};
  out_.fields_.try_emplace(field_key(type, *field), std::move(value));
  return true;
}

bool VmStructsParser::on_type(const TableLayout& table, const Entry& entry, std::string name) {
  const std::optional<std::string> superclass =
      optional_string(entry_word(entry, table.members[1], 8));
  if (!superclass) return fail_read("type entry of " + name + ": superclass name");
  out_.types_.try_emplace(std::move(name),
                          VmType{*superclass, entry_word(entry, table.members[2], 8)});
  return true;
}

bool VmStructsParser::on_int_constant(const TableLayout& table, const Entry& entry,
                                      std::string name) {
  const auto value = static_cast<uint32_t>(entry_word(entry, table.members[1], 4));
  out_.int_constants_.try_emplace(std::move(name), static_cast<int32_t>(value));
  return true;
}

bool VmStructsParser::on_long_constant(const TableLayout& table, const Entry& entry,
                                       std::string name) {
  out_.long_constants_.try_emplace(std::move(name), entry_word(entry, table.members[1], 8));
  return true;
}

VmStructsResult VmStructsParser::parse() {
  using S = VmSymbol;
  auto fields = table_layout("field", S::kStructs, S::kStructStride,
                             {{S::kStructTypeName, 8},
                              {S::kStructFieldName, 8},
                              {S::kStructTypeString, 8},
                              {S::kStructIsStatic, 4},
                              {S::kStructOffset, 8},
                              {S::kStructAddress, 8}});
  if (fields) read_table(*fields, &VmStructsParser::on_field);
  auto types =
      error_
          ? std::nullopt
          : table_layout("type", S::kTypes, S::kTypeStride,
                         {{S::kTypeTypeName, 8}, {S::kTypeSuperclassName, 8}, {S::kTypeSize, 8}});
  if (types) read_table(*types, &VmStructsParser::on_type);
  auto ints = error_ ? std::nullopt
                     : table_layout("int constant", S::kIntConstants, S::kIntConstantStride,
                                    {{S::kIntConstantName, 8}, {S::kIntConstantValue, 4}});
  if (ints) read_table(*ints, &VmStructsParser::on_int_constant);
  auto longs = error_ ? std::nullopt
                      : table_layout("long constant", S::kLongConstants, S::kLongConstantStride,
                                     {{S::kLongConstantName, 8}, {S::kLongConstantValue, 8}});
  if (longs) read_table(*longs, &VmStructsParser::on_long_constant);
  if (error_) return *error_;
  out_.bytes_read_ = reader_.bytes_read();
  return std::move(out_);
}

VmStructsResult read_vm_structs(RemoteReader& reader, const VmSymbolAddresses& symbols,
                                const VmStructsLimits& limits) {
  return VmStructsParser(reader, symbols, limits).parse();
}

namespace {

// The file of a mapping as the process sees it: map_files names the very file mapped (also in
// another mount namespace) but needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE; otherwise the
// path under the process's root.
std::string mapped_file_path(Pid pid, const MapEntry& mapping) {
  char name[96] = {};
  snprintf(name, sizeof(name), "/proc/%d/map_files/%llx-%llx", pid.value,
           static_cast<unsigned long long>(mapping.start),
           static_cast<unsigned long long>(mapping.end));
  if (access(name, R_OK) == 0) return name;
  return "/proc/" + std::to_string(pid.value) + "/root" +
         std::string(mapping.path_without_deleted_suffix());
}

std::optional<VmStructsError> find_symbols(const std::string& file, uint64_t bias,
                                           VmSymbolAddresses& out) {
  const UniqueFd fd =
      open_untrusted(file, UntrustedKind::kBinary, std::nullopt, Copying::kNever).fd;
  if (!fd) return VmStructsError{VmStructsFailure::kNoJvm, file + ": cannot open libjvm"};
  const std::vector<std::string> names(kSymbolNames.begin(), kSymbolNames.end());
  const auto symbols = read_dynamic_symbols(fd.get(), names);
  for (size_t i = 0; i < kVmSymbolCount; ++i) {
    auto it = symbols.find(names[i]);
    if (it == symbols.end() || !it->second.defined || !it->second.address)
      return VmStructsError{VmStructsFailure::kNoTables, "libjvm does not export " + names[i]};
    out.address[i] = it->second.address + bias;
  }
  return std::nullopt;
}

}  // namespace

std::variant<JvmLibrary, VmStructsError> locate_jvm_library(Pid pid) {
  const std::optional<std::vector<MapEntry>> maps = read_proc_maps(pid.value);
  if (!maps) return VmStructsError{VmStructsFailure::kNoJvm, "process gone"};
  for (const MapEntry& mapping : *maps) {
    if (base_name(mapping.path_without_deleted_suffix()) != "libjvm.so") continue;
    const std::string file = mapped_file_path(pid, mapping);
    std::string error;
    const std::unique_ptr<ElfFile> elf = ElfFile::open(file, &error, ElfContents::kLayout);
    if (!elf) return VmStructsError{VmStructsFailure::kNoJvm, error};
    const std::optional<uint64_t> vaddr = elf->file_offset_to_vaddr(mapping.file_offset);
    if (!vaddr) continue;  // a mapping of no load segment; another one places the file
    JvmLibrary library{
        std::string(mapping.path_without_deleted_suffix()), mapping.start - *vaddr, {}};
    if (auto missing = find_symbols(file, library.bias, library.symbols)) return *missing;
    return library;
  }
  return VmStructsError{VmStructsFailure::kNoJvm, "no libjvm.so mapped"};
}

VmStructsResult read_vm_structs(Pid pid, const VmStructsLimits& limits) {
  auto library = locate_jvm_library(pid);
  if (auto* error = std::get_if<VmStructsError>(&library)) return *error;
  ProcessMemory memory(pid);
  RemoteReader reader(memory, limits.max_bytes, limits.max_string_bytes);
  return read_vm_structs(reader, std::get<JvmLibrary>(library).symbols, limits);
}

}  // namespace bpfprof::hotspot
