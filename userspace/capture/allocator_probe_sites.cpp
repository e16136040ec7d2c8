#include "userspace/capture/allocator_probe_sites.h"

#include <fcntl.h>

#include <algorithm>
#include <vector>

#include "symbols/elf/elf_file.h"
#include "symbols/util/unique_handle.h"

namespace bpfprof {

uint64_t offset_past_null_check(std::span<const uint8_t> code) {
  constexpr uint8_t kTestRdiRdi[] = {0x48, 0x85, 0xff};
  if (code.size() < 3 || !std::equal(kTestRdiRdi, kTestRdiRdi + 3, code.begin())) return 0;
  size_t at = 3;
  if (code.size() > at + 1 && code[at] == 0x74)  // je rel8
    at += 2;
  else if (code.size() > at + 5 && code[at] == 0x0f && code[at + 1] == 0x84)  // je rel32
    at += 6;
  else
    return 0;
  const bool push = code.size() > at && code[at] >= 0x50 && code[at] <= 0x57;
  const bool push_r8_r15 =
      code.size() > at + 1 && code[at] == 0x41 && code[at + 1] >= 0x50 && code[at + 1] <= 0x57;
  return push || push_r8_r15 ? at : 0;
}

uint64_t probe_offset_past_null_check(const std::string& path, const std::string& function) {
  const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return 0;
  const auto symbols = read_dynamic_symbols(fd.get(), {function});
  const auto it = symbols.find(function);
  if (it == symbols.end() || !it->second.defined) return 0;
  return offset_past_null_check(read_code_bytes(fd.get(), it->second.address, 16));
}

std::vector<std::string> functions_at_distinct_addresses(
    const std::string& path, const std::vector<std::string>& functions) {
  const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return {};
  const auto symbols = read_dynamic_symbols(fd.get(), {functions.begin(), functions.end()});
  std::vector<std::string> distinct;
  std::vector<uint64_t> addresses;
  for (const std::string& function : functions) {
    const auto it = symbols.find(function);
    if (it == symbols.end() || !it->second.defined) continue;
    if (std::find(addresses.begin(), addresses.end(), it->second.address) != addresses.end())
      continue;
    addresses.push_back(it->second.address);
    distinct.push_back(function);
  }
  return distinct;
}

}  // namespace bpfprof
