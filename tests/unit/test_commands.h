// Helpers for unit tests that compile small programs and compare with binutils' view.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

namespace bpfprof::testing_helpers {

// The standard output of a shell command.
inline std::string run_command(const std::string& command) {
  std::string output;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return output;
  char buffer[4096];
  size_t got = 0;
  while ((got = fread(buffer, 1, sizeof buffer, pipe.get())) > 0) output.append(buffer, got);
  return output;
}

inline void write_file(const std::filesystem::path& path, std::string_view contents) {
  std::ofstream(path, std::ios::binary)
      .write(contents.data(), static_cast<std::streamsize>(contents.size()));
}

// The C library this test process runs on, from its own maps; "" if none is found.
inline std::string own_libc() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (const size_t at = line.find('/');
        at != std::string::npos && line.find("/libc.so", at) != std::string::npos)
      return line.substr(at);
  return {};
}

}  // namespace bpfprof::testing_helpers
