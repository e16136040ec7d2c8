// Interns strings into the profile's shared stringArray.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "userspace/model/ids.h"

namespace bpfprof {

using StringIndex = StrongId<struct StringIndexTag, uint32_t>;

class StringTable {
 public:
  StringIndex intern(std::string_view s) {
    auto it = index_.find(s);
    if (it != index_.end()) return it->second;
    StringIndex id{static_cast<uint32_t>(strings_.size())};
    strings_.emplace_back(s);
    index_.emplace(strings_.back(), id);
    return id;
  }
  const std::vector<std::string>& strings() const { return strings_; }
  size_t size() const { return strings_.size(); }

 private:
  std::vector<std::string> strings_;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, StringIndex, Hash, std::equal_to<>> index_;
};

}  // namespace bpfprof
