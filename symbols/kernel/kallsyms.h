// Kernel text symbols from /proc/kallsyms, for naming kernel frames.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bpfprof {

struct KernelSymbol {
  uint64_t address = 0;
  uint64_t end = 0;  // the next symbol's address: kallsyms has no sizes
  std::string name;
  std::string module;  // from a "[module]" suffix; empty for vmlinux itself
};

class KernelSymbols {
 public:
  // Parses kallsyms text, keeping text symbols (types t, T, w, W). Malformed lines are
  // skipped.
  static KernelSymbols parse(std::string_view text);
  // nullopt if the file cannot be read.
  static std::optional<KernelSymbols> load(const std::string& path = "/proc/kallsyms");

  // The symbol whose [address, end) holds addr, or nullptr.
  const KernelSymbol* lookup(uint64_t addr) const;

  // True when every address read as 0: kptr_restrict hides them from this reader, and
  // kernel frames cannot be named. The symbol list is then empty.
  bool addresses_hidden() const { return addresses_hidden_; }
  // Address of _text (else _stext, else the lowest vmlinux text symbol); 0 if unknown.
  // Kernel frame addresses are made relative to this.
  uint64_t text_start() const { return text_start_; }

  // Sorted by address, one per address.
  const std::vector<KernelSymbol>& symbols() const { return symbols_; }

 private:
  std::vector<KernelSymbol> symbols_;
  bool addresses_hidden_ = false;
  uint64_t text_start_ = 0;
};

}  // namespace bpfprof
