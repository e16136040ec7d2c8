#include "userspace/session/program_files.h"

#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>

#include "symbols/util/read_file.h"
#include "symbols/util/run_program.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"
#include "userspace/session/launcher.h"

namespace bpfprof {
namespace {

constexpr const char* kSystemLoader = "/lib64/ld-linux-x86-64.so.2";

std::string real_path(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) ? std::string(resolved) : std::string();
}

// The interpreter a `#!` script names (`#!/usr/bin/env NAME` resolved in PATH), else nullopt.
std::optional<std::string> script_interpreter(int fd) {
  std::array<char, 256> head{};
  const ssize_t got = pread(fd, head.data(), head.size() - 1, 0);
  if (got < 2 || head[0] != '#' || head[1] != '!') return std::nullopt;
  std::string_view line(head.data() + 2, static_cast<size_t>(got) - 2);
  line = line.substr(0, line.find('\n'));
  std::vector<std::string> words;
  for (std::string_view word : split(line, ' '))
    if (!trim(word).empty()) words.emplace_back(trim(word));
  if (words.empty()) return std::nullopt;
  if (words[0] == "/usr/bin/env" && words.size() > 1) return find_executable(words[1]);
  return words[0];
}

struct ElfCloser {
  void operator()(Elf* elf) const noexcept { elf_end(elf); }
};

// The PT_INTERP of the ELF file open as `fd`: empty for a static program or no ELF file.
std::string elf_interpreter(int fd) {
  elf_version(EV_CURRENT);
  std::unique_ptr<Elf, ElfCloser> elf(
      elf_begin(fd, ELF_C_READ, nullptr));  // no mapping: see read_elf_build_id
  size_t count = 0;
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF || elf_getphdrnum(elf.get(), &count) != 0) return {};
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr header;
    if (gelf_getphdr(elf.get(), static_cast<int>(i), &header) == nullptr ||
        header.p_type != PT_INTERP || header.p_filesz < 2 || header.p_filesz > PATH_MAX)
      continue;
    std::string path(header.p_filesz, '\0');
    if (!pread_exact(fd, path.data(), path.size(), header.p_offset)) return {};
    return path.substr(0, path.find('\0'));
  }
  return {};
}

}  // namespace

std::vector<std::string> parse_loader_list(std::string_view output) {
  std::vector<std::string> paths;
  for (std::string_view line : split(output, '\n')) {
    line = trim(line);
    if (const size_t arrow = line.find(" => "); arrow != std::string_view::npos)
      line = line.substr(arrow + 4);
    line = line.substr(0, line.find(" ("));
    if (!line.starts_with('/')) continue;  // "linux-vdso.so.1", "libx.so => not found"
    if (std::find(paths.begin(), paths.end(), line) == paths.end()) paths.emplace_back(line);
  }
  return paths;
}

std::vector<std::string> files_mapped_at_start(const std::string& executable) {
  std::string program = executable;
  UniqueFd fd;
  for (int depth = 0; depth < 4; ++depth) {  // a script's interpreter may be a script
    fd = open_untrusted(program, UntrustedKind::kBinary, std::nullopt, Copying::kNever).fd;
    if (!fd.valid()) return {};
    std::optional<std::string> interpreter = script_interpreter(fd.get());
    if (!interpreter) break;
    program = *interpreter;
  }
  std::vector<std::string> files{real_path(program)};
  if (files[0].empty()) return {};
  const std::string loader = elf_interpreter(fd.get());
  if (loader.empty()) return files;
  // Only the system's loader is run as a helper: a program's own could be anything.
  if (real_path(loader) != real_path(kSystemLoader)) return {files[0], real_path(loader)};
  std::optional<std::string> listed =
      program_output({kSystemLoader, "--list", program}, std::chrono::seconds(2));
  if (!listed) return {files[0], real_path(loader)};
  for (const std::string& path : parse_loader_list(*listed)) {
    std::string resolved = real_path(path);
    if (!resolved.empty() && std::find(files.begin(), files.end(), resolved) == files.end())
      files.push_back(std::move(resolved));
  }
  return files;
}

}  // namespace bpfprof
