#include "runtimes/kit/release.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

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

void scan_file_text(int fd, uint64_t size, const std::function<bool(std::string_view)>& visit) {
  constexpr size_t kPiece = size_t{1} << 20;
  std::string piece(kPiece + kFileTextOverlap, '\0');
  size_t kept = 0;
  for (uint64_t offset = 0; offset < size;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kPiece, size - offset));
    const ssize_t got = pread(fd, piece.data() + kept, want, static_cast<off_t>(offset));
    if (got <= 0) return;
    const std::string_view bytes(piece.data(), kept + static_cast<size_t>(got));
    if (visit(bytes)) return;
    offset += static_cast<uint64_t>(got);
    kept = std::min(kFileTextOverlap, bytes.size());
    memmove(piece.data(), bytes.data() + bytes.size() - kept, kept);
  }
}

}  // namespace bpfprof
