#include "runtimes/kit/release.h"

#include <cctype>

namespace bpfprof {

std::optional<RuntimeRelease> parse_release(std::string_view text) {
  RuntimeRelease v;
  uint32_t* parts[] = {&v.major, &v.minor, &v.patch};
  for (size_t i = 0; i < 3; ++i) {
    size_t digits = 0;
    while (digits < text.size() && digits < 6 &&
           std::isdigit(static_cast<unsigned char>(text[digits])))
      *parts[i] = *parts[i] * 10 + static_cast<uint32_t>(text[digits++] - '0');
    if (digits == 0) return i == 2 ? std::optional(v) : std::nullopt;  // "8.2": no patch
    text.remove_prefix(digits);
    if (i == 2) break;
    if (!text.starts_with('.')) return i == 1 ? std::optional(v) : std::nullopt;
    text.remove_prefix(1);
  }
  return v;
}

}  // namespace bpfprof
