#include "symbols/demangle.h"

#include <cstdlib>
#include <memory>

#include <libiberty/demangle.h>

namespace bpfprof {

namespace {

bool is_version_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

// One libiberty style; nullopt-like empty result when it rejects the name.
std::string try_demangle(const std::string& mangled, int style) {
  std::unique_ptr<char, FreeDeleter> out(cplus_demangle(mangled.c_str(), DMGL_ANSI | style));
  return out ? std::string(out.get()) : std::string();
}

}  // namespace

std::string_view strip_symbol_version(std::string_view symbol) {
  // ELF symbol versions: NAME@VERSION (non-default) or NAME@@VERSION (default).
  const size_t at = symbol.find('@');
  if (at == std::string_view::npos || at == 0) return symbol;
  std::string_view version = symbol.substr(at + 1);
  if (!version.empty() && version.front() == '@') version.remove_prefix(1);
  if (version.empty()) return symbol;
  for (char c : version)
    if (!is_version_char(c)) return symbol;
  return symbol.substr(0, at);
}

std::string demangle(std::string_view symbol) {
  // PLT slots, named `name@plt` by bpfprof as by objdump: "plt" is not a symbol version.
  constexpr std::string_view kPltSuffix = "@plt";
  if (symbol.size() > kPltSuffix.size() && symbol.ends_with(kPltSuffix)) {
    return demangle(symbol.substr(0, symbol.size() - kPltSuffix.size())) + std::string(kPltSuffix);
  }
  const std::string name(strip_symbol_version(symbol));
  // libiberty reads a C string: a name with an embedded NUL is not a symbol we can demangle.
  if (name.size() < 3 || name.find('\0') != std::string::npos) return name;
  std::string out;
  if (name.starts_with("_R")) {
    out = try_demangle(name, DMGL_RUST);
  } else if (name.starts_with("_Z")) {
    // Legacy Rust symbols are valid Itanium names too: Rust first, so that the
    // `::h<hash>` element is dropped and Rust's own escapes ($LT$, ..) are decoded.
    out = try_demangle(name, DMGL_RUST);
    if (out.empty()) out = try_demangle(name, DMGL_GNU_V3);
  }
  // Not DMGL_AUTO: its Ada fallback turns unknown names into `<name>`.
  return out.empty() ? name : out;
}

}  // namespace bpfprof
