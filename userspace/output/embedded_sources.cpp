#include "userspace/output/embedded_sources.h"

#include <algorithm>

#include "symbols/util/untrusted_file.h"

namespace bpfprof {

EmbeddedSources embed_sources(SharedTables& tables, const std::vector<double>& weight_by_source,
                              const EmbedLimits& limits) {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < weight_by_source.size() && i < tables.sources.size(); ++i)
    if (weight_by_source[i] > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return weight_by_source[a] > weight_by_source[b];
  });
  EmbeddedSources result;
  for (uint32_t i : order) {
    const SourceIndex source{i};
    const std::string& path = tables.strings.strings()[tables.sources.filename(source).value];
    std::optional<std::string> text = read_regular_file(path, limits.max_file_bytes);
    if (!text) {
      ++result.unreadable;
    } else if (result.bytes + text->size() > limits.max_total_bytes) {
      ++result.left_out;
    } else {
      result.bytes += text->size();
      ++result.files;
      tables.sources.set_content(source, std::move(*text));
    }
  }
  return result;
}

}  // namespace bpfprof
