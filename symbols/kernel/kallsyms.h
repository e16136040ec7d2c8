// Kernel text symbols from /proc/kallsyms, for naming kernel frames.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bpfprof {

// A view into its KernelSymbols: valid while that lives.
struct KernelSymbol {
  uint64_t address = 0;
  uint64_t end = 0;  // the next symbol's address: kallsyms has no sizes
  std::string_view name;
  std::string_view module;  // from a "[module]" suffix; empty for vmlinux itself
};

// Some 120,000 text symbols on a distribution kernel: 16 bytes each and their names in one
// string (5 MB; a string pair per symbol took 12.6 MB, at the peak of the profile's writing).
class KernelSymbols {
 public:
  // Parses kallsyms text, keeping text symbols (types t, T, w, W). Malformed lines are
  // skipped.
  static KernelSymbols parse(std::string_view text);
  // nullopt if the file cannot be read. With `wanted` (sorted, unique), only the symbols that
  // lookup() needs for those addresses are kept: the nearest at or below each and the nearest
  // above it (a profile's few thousand kernel frames: kilobytes, not 5 MB); lookup() of any
  // other address is then wrong.
  static std::optional<KernelSymbols> load(const std::string& path = "/proc/kallsyms",
                                           std::span<const uint64_t> wanted = {});

  // The symbol whose [address, end) holds addr.
  std::optional<KernelSymbol> lookup(uint64_t addr) const;

  // True when every address read as 0: kptr_restrict hides them from this reader, and
  // kernel frames cannot be named. The symbol list is then empty.
  bool addresses_hidden() const { return addresses_hidden_; }
  // Address of _text (else _stext, else the lowest vmlinux text symbol); 0 if unknown.
  // Kernel frame addresses are made relative to this.
  uint64_t text_start() const { return text_start_; }
  // A module's lowest text symbol, where its frames' addresses are made relative to.
  std::optional<uint64_t> module_base(std::string_view module) const;

  // Sorted by address, one per address.
  size_t size() const { return entries_.size(); }
  KernelSymbol operator[](size_t index) const;

 private:
  struct Entry {
    uint64_t address;
    uint32_t name_offset;  // in names_
    uint16_t name_size;
    uint16_t module;  // in modules_; 0: vmlinux
  };
  class Builder;
  std::optional<uint16_t> module_index(std::string_view module, uint16_t last);
  uint64_t end_of(size_t index) const;

  std::vector<Entry> entries_;
  std::string names_;
  std::vector<std::string> modules_{std::string()};
  std::vector<uint64_t> module_lowest_{0};  // by module, of every symbol read
  bool addresses_hidden_ = false;
  uint64_t text_start_ = 0;
};

}  // namespace bpfprof
