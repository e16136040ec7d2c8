// What the profile builder asks about code: names, libraries and thread roots. An interface,
// so that a test can build a profile from a hand-made model with made-up names, without the
// binaries, kallsyms or root.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "symbols/symbolizer.h"

namespace bpfprof {

class ProfileSymbolizer {
 public:
  virtual ~ProfileSymbolizer() = default;

  // `path` names the library in the profile, `readable_path` is where its file can be
  // read; `reported_build_id` is the one the kernel gave with the mapping (may be empty).
  virtual LibraryDescription describe_library(const std::string& path,
                                              const std::string& readable_path,
                                              const std::string& reported_build_id) = 0;
  virtual LibraryDescription describe_kernel() = 0;
  // Each never empty: at least one frame, possibly unnamed; inlined functions outermost first.
  virtual std::vector<SymbolizedFrame> symbolize_in_file(const std::string& readable_path,
                                                         uint64_t file_offset) = 0;
  virtual std::vector<SymbolizedFrame> symbolize_kernel(uint64_t address) = 0;
  // The kernel addresses symbolize_kernel will be asked for (a hint: fewer symbols kept).
  virtual void prepare_kernel(std::vector<uint64_t> /*addresses*/) {}
  // JIT code of `pid`, whose perf map must belong to `owner_uid` or root.
  virtual std::vector<SymbolizedFrame> symbolize_jit(int pid, uint32_t owner_uid,
                                                     uint64_t address) = 0;
  // Whether the code at `file_offset` is the outermost frame of a thread.
  virtual bool is_thread_root(const std::string& readable_path, uint64_t file_offset) = 0;
};

// The real one: ELF, DWARF, kallsyms and perf maps (symbols/).
class SystemSymbolizer final : public ProfileSymbolizer {
 public:
  explicit SystemSymbolizer(SymbolizerOptions options) : symbolizer_(std::move(options)) {}

  LibraryDescription describe_library(const std::string& path, const std::string& readable_path,
                                      const std::string& reported_build_id) override {
    return symbolizer_.describe_library(path, readable_path, reported_build_id);
  }
  LibraryDescription describe_kernel() override { return symbolizer_.describe_kernel(); }
  std::vector<SymbolizedFrame> symbolize_in_file(const std::string& readable_path,
                                                 uint64_t file_offset) override {
    return symbolizer_.symbolize_in_file(readable_path, file_offset);
  }
  std::vector<SymbolizedFrame> symbolize_kernel(uint64_t address) override {
    return symbolizer_.symbolize_kernel(address);
  }
  void prepare_kernel(std::vector<uint64_t> addresses) override {
    symbolizer_.prepare_kernel(std::move(addresses));
  }
  std::vector<SymbolizedFrame> symbolize_jit(int pid, uint32_t owner_uid,
                                             uint64_t address) override {
    return symbolizer_.symbolize_jit(pid, owner_uid, address);
  }
  bool is_thread_root(const std::string& readable_path, uint64_t file_offset) override {
    return symbolizer_.is_thread_root(readable_path, file_offset);
  }

 private:
  Symbolizer symbolizer_;
};

}  // namespace bpfprof
