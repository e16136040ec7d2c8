// The BEAM's own map of its loaded code, read from another process (untrusted memory): the
// active code index's range table (one range per loaded module, sorted by start: the module's
// header), a module's functions (its header's ErtsCodeInfo pointers, sorted), each one's MFA,
// and the atoms that name them. A pc maps to `module:function/arity` as the emulator's own
// erts_lookup_function_info maps it. Loading a module makes a new range table (a new code
// index); purging one empties its range in place: a pc is named from the table current when it
// is named, which still holds a module that was running at the sample unless it was purged
// since (then the pc is unnamed, never misnamed by another module's table).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtimes/beam/layout.h"
#include "runtimes/kit/remote_memory.h"

namespace bpfprof {

// Addresses in the emulator's process (its load bias applied).
struct BeamAddresses {
  uint64_t active_code_index = 0;
  uint64_t ranges = 0;
  uint64_t atom_table = 0;
};

struct BeamMfa {
  std::string module;
  std::string function;
  uint32_t arity = 0;
  bool operator==(const BeamMfa&) const = default;
};

// Bounds on what a table may claim: more is garbage, not read.
inline constexpr uint64_t kMaxBeamModules = 1 << 16;
inline constexpr uint64_t kMaxBeamModuleFunctions = 1 << 18;
inline constexpr uint32_t kMaxBeamAtomIndex = 1 << 24;
inline constexpr uint32_t kMaxBeamAtomBytes = 1020;  // 255 characters of UTF-8
inline constexpr uint32_t kMaxBeamArity = 255;

class BeamCodeIndex {
 public:
  BeamCodeIndex(const BeamLayout& layout, const BeamAddresses& addresses)
      : layout_(layout), addresses_(addresses) {}

  // The function whose code holds `pc`; nullopt for code no loaded module holds (the JIT's
  // shared fragments, the emulator's C code) and for memory that does not read as the layout
  // says.
  std::optional<BeamMfa> function_at(RemoteReader& reader, uint64_t pc);
  // Reads the range table again if the code index changed (a module loaded or purged): the
  // caller does so now and then, so that a purged module's memory, reused by a newer one, is
  // not named from the older table.
  void check_generation(RemoteReader& reader);
  // The code map a sample was taken under (the active code index and its range table's array
  // then): the map is read again when it differs from the last sample's. Every load commits
  // the next code index, so consecutive maps always differ, while one three loads later may
  // have the same index and array address (freed and allocated again): the comparison is
  // with the last sample's map, not with the one read.
  void follow(RemoteReader& reader, uint32_t index, uint64_t modules);
  // Whether the last sample's map was this one: following it again reads nothing.
  bool following(uint32_t index, uint64_t modules) const {
    return followed_ == std::pair{index, modules};
  }
  // The text of atom term `atom`.
  std::optional<std::string> atom_text(RemoteReader& reader, uint64_t atom);

  // Range tables read (each a new code index, or a first read).
  uint64_t tables_read() const { return tables_read_; }

 private:
  struct Module {
    uint64_t start;  // its BeamCodeHeader
    uint64_t end;
  };
  struct Generation {
    uint32_t index = ~0u;
    uint64_t modules = 0;
    uint64_t count = 0;
    bool operator==(const Generation&) const = default;
  };
  std::optional<Generation> read_generation(RemoteReader& reader) const;
  bool read_modules(RemoteReader& reader, const Generation& generation);
  const Module* module_at(uint64_t pc) const;
  // The ErtsCodeInfo whose function holds pc in the module whose header is `header`.
  std::optional<uint64_t> code_info_at(RemoteReader& reader, uint64_t header, uint64_t pc);

  const BeamLayout& layout_;
  BeamAddresses addresses_;
  Generation generation_;
  std::pair<uint32_t, uint64_t> followed_{~0u, 0};                 // the last sample's map
  std::vector<Module> modules_;                                    // sorted by start
  std::unordered_map<uint64_t, std::vector<uint64_t>> functions_;  // header -> functions[]

  std::unordered_map<uint32_t, std::string> atoms_;  // atom index -> text
  uint64_t tables_read_ = 0;
};

}  // namespace bpfprof
