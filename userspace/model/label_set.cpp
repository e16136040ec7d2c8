#include "userspace/model/label_set.h"

namespace bpfprof {
namespace {

bool is_special(char c) { return c == '\\' || c == ',' || c == '='; }

void append_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    if (is_special(c)) out += '\\';
    out += c;
  }
}

// The text up to the first unescaped `stop` (or the end) from `at`, unescaped; `at` moves past
// it. nullopt for a backslash at the end or before a character it does not escape.
std::optional<std::string> unescape_until(std::string_view name, size_t& at, char stop) {
  std::string out;
  while (at < name.size() && name[at] != stop) {
    if (name[at] == '\\') {
      if (at + 1 == name.size() || !is_special(name[at + 1])) return std::nullopt;
      ++at;
    } else if (is_special(name[at])) {
      return std::nullopt;  // an unescaped ',' or '=' where the other was expected
    }
    out += name[at++];
  }
  return out;
}

}  // namespace

std::string label_frame_name(const LabelSet& labels) {
  std::string name(kLabelFramePrefix.substr(0, kLabelFramePrefix.size() - 1));
  for (size_t i = 0; i < labels.size(); ++i) {
    name += i == 0 ? " " : ", ";
    append_escaped(name, labels[i].first);
    name += '=';
    append_escaped(name, labels[i].second);
  }
  return name;
}

std::optional<LabelSet> parse_label_frame_name(std::string_view name) {
  const std::string_view bare = kLabelFramePrefix.substr(0, kLabelFramePrefix.size() - 1);
  if (name == bare) return LabelSet{};
  if (!name.starts_with(kLabelFramePrefix)) return std::nullopt;
  LabelSet labels;
  size_t at = kLabelFramePrefix.size();
  while (true) {
    std::optional<std::string> key = unescape_until(name, at, '=');
    if (!key || at == name.size()) return std::nullopt;
    ++at;  // '='
    std::optional<std::string> value = unescape_until(name, at, ',');
    if (!value) return std::nullopt;
    labels.emplace_back(std::move(*key), std::move(*value));
    if (at == name.size()) return labels;
    if (name.substr(at, 2) != ", ") return std::nullopt;
    at += 2;
  }
}

}  // namespace bpfprof
