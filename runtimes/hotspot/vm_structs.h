// HotSpot's description of itself, read from a running JVM. libjvm exports, for its
// serviceability agent, four tables that the JVM fills as it starts: the fields of its C++
// classes (offsets, or addresses of static fields), the sizes of its types, and named int and
// long constants. Each table is an array of entries whose layout (where each member of an
// entry lies, how far apart entries are) libjvm exports as variables too, so neither the
// entries nor the classes they describe need to be known to bpfprof at build time: one reader
// works for every JDK build that has the tables (JDK 8 and later).
//
// The tables are read from the process (the pointers are set at JVM start), at the addresses
// of libjvm's symbols plus the library's load bias there. The process's memory is untrusted:
// every read is bounded (entries, string lengths, total bytes) and a table that is not
// plausible gives an error, never a crash or a hang.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "runtimes/kit/remote_memory.h"
#include "userspace/model/ids.h"

namespace bpfprof::hotspot {

// libjvm's exported symbols that locate and describe the tables.
enum class VmSymbol : uint8_t {
  kStructs,  // VMStructEntry* gHotSpotVMStructs: the fields
  kStructTypeName,
  kStructFieldName,
  kStructTypeString,
  kStructIsStatic,
  kStructOffset,
  kStructAddress,
  kStructStride,
  kTypes,  // VMTypeEntry* gHotSpotVMTypes: the type sizes
  kTypeTypeName,
  kTypeSuperclassName,
  kTypeSize,
  kTypeStride,
  kIntConstants,
  kIntConstantName,
  kIntConstantValue,
  kIntConstantStride,
  kLongConstants,
  kLongConstantName,
  kLongConstantValue,
  kLongConstantStride,
  kCount,
};
constexpr size_t kVmSymbolCount = static_cast<size_t>(VmSymbol::kCount);
// "gHotSpotVMStructs", "gHotSpotVMStructEntryTypeNameOffset", ...
std::string_view vm_symbol_name(VmSymbol symbol);

// Where each symbol is in the process (libjvm's address plus its load bias).
struct VmSymbolAddresses {
  std::array<uint64_t, kVmSymbolCount> address{};
  uint64_t operator[](VmSymbol symbol) const { return address[static_cast<size_t>(symbol)]; }
  uint64_t& operator[](VmSymbol symbol) { return address[static_cast<size_t>(symbol)]; }
};

struct VmStructsLimits {
  size_t max_entries = 8192;        // per table (JDK 17 has 788 fields and 768 types)
  size_t max_string_bytes = 256;    // a type, field or constant name, NUL included
  uint64_t max_bytes = 4ull << 20;  // all reads of one process's tables
  uint64_t max_entry_stride = 256;  // bytes between entries (48 for fields in JDK 17)
};

enum class VmStructsFailure : uint8_t {
  kNoJvm,           // no libjvm mapped, or the process is gone
  kNoTables,        // libjvm without the exported tables (not HotSpot, or stripped of them)
  kBadEntryLayout,  // an entry layout variable that no build has (stride, member offsets)
  kUnreadable,      // a table, entry or name could not be read
  kTooMany,         // a table with no end within max_entries
  kBudgetUsed,      // the reads passed max_bytes
};

struct VmStructsError {
  VmStructsFailure failure;
  std::string message;  // one line
};

struct VmField {
  std::string type_string;  // the field's C++ type as HotSpot spells it ("Symbol*"); may be empty
  bool is_static = false;
  uint64_t offset = 0;   // in its class (non-static fields)
  uint64_t address = 0;  // in the process (static fields)
};

struct VmType {
  std::string superclass;  // empty for none
  uint64_t size = 0;       // sizeof; 0 for types HotSpot does not size
};

// The four tables, by name. Names are "Type::field" for fields, as HotSpot writes them.
class VmStructs {
 public:
  // A non-static field's offset in its class.
  std::optional<uint64_t> offset_of(std::string_view type, std::string_view field) const;
  // A static field's address in the process.
  std::optional<uint64_t> address_of(std::string_view type, std::string_view field) const;
  const VmField* field(std::string_view type, std::string_view field) const;
  const VmType* type(std::string_view name) const;
  std::optional<uint64_t> size_of(std::string_view type) const;
  std::optional<int32_t> int_constant(std::string_view name) const;
  std::optional<uint64_t> long_constant(std::string_view name) const;

  size_t field_count() const { return fields_.size(); }
  size_t type_count() const { return types_.size(); }
  size_t int_constant_count() const { return int_constants_.size(); }
  size_t long_constant_count() const { return long_constants_.size(); }
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  friend class VmStructsParser;
  std::map<std::string, VmField, std::less<>> fields_;
  std::map<std::string, VmType, std::less<>> types_;
  std::map<std::string, int32_t, std::less<>> int_constants_;
  std::map<std::string, uint64_t, std::less<>> long_constants_;
  uint64_t bytes_read_ = 0;
};

using VmStructsResult = std::variant<VmStructs, VmStructsError>;

// The tables read through `reader` from the symbols' addresses: the parsing, the same for a
// live process, a test's image and the fuzzer's.
VmStructsResult read_vm_structs(RemoteReader& reader, const VmSymbolAddresses& symbols,
                                const VmStructsLimits& limits);

// A process's libjvm: where it is loaded and where the table symbols are in the process.
struct JvmLibrary {
  std::string path;  // as /proc/PID/maps names it
  uint64_t bias = 0;
  VmSymbolAddresses symbols;
};
std::variant<JvmLibrary, VmStructsError> locate_jvm_library(Pid pid);

// locate_jvm_library, then the tables read from the process within `limits`.
VmStructsResult read_vm_structs(Pid pid, const VmStructsLimits& limits = {});

}  // namespace bpfprof::hotspot
