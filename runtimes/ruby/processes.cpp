#include "runtimes/ruby/processes.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "symbols/util/read_file.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {

std::optional<RubyVersion> ruby_version_from_file_name(std::string_view name) {
  constexpr std::string_view kPrefix = "libruby";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  if (name.starts_with("-")) {
    name.remove_prefix(1);
  } else if (name.starts_with(".so.")) {
    name.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  RubyVersion v;
  const char* end = name.data() + name.size();
  auto [dot, major_error] = std::from_chars(name.data(), end, v.major);
  if (major_error != std::errc() || dot == end || *dot != '.') return std::nullopt;
  auto [rest, minor_error] = std::from_chars(dot + 1, end, v.minor);
  if (minor_error != std::errc()) return std::nullopt;
  return v;
}

namespace {

int32_t s32_at(const std::vector<uint8_t>& code, size_t at) {
  int32_t value = 0;
  memcpy(&value, code.data() + at, sizeof(value));
  return value;
}

// The address a RIP-relative operand at `at` (ModRM mod 00, r/m 101: disp32 follows) points
// to, for an instruction of `length` bytes at `start`.
std::optional<uint64_t> rip_operand(const std::vector<uint8_t>& code, uint64_t start, size_t at,
                                    size_t length) {
  if (at + 5 > code.size() || (code[at] & 0xc7) != 0x05) return std::nullopt;
  return start + length + static_cast<uint64_t>(int64_t{s32_at(code, at + 1)});
}

}  // namespace

std::optional<uint64_t> find_ruby_global_symbols(const ReadLibraryCode& code, uint64_t id2str,
                                                 const RubyLayout& l) {
  constexpr size_t kEntryBytes = 32;  // rb_id2str: the ID to a serial, then `jmp rel32`
  constexpr size_t kBodyBytes = 128;  // where the reader loads last_id and ids
  const std::vector<uint8_t> entry = code(id2str, kEntryBytes);
  uint64_t reader = 0;
  for (size_t i = 0; i + 5 <= entry.size() && !reader; ++i)
    if (entry[i] == 0xe9)
      reader = id2str + i + 5 + static_cast<uint64_t>(int64_t{s32_at(entry, i + 1)});
  if (!reader) return std::nullopt;
  const std::vector<uint8_t> body = code(reader, kBodyBytes);
  // Scanned at every byte: a match inside another instruction must also find its pair.
  std::vector<uint64_t> compared;
  std::vector<uint64_t> loaded;
  for (size_t i = 0; i + 7 <= body.size(); ++i) {
    const uint64_t at = reader + i;
    const bool rex = (body[i] & 0xf0) == 0x40;
    // cmp %r32,disp32(%rip): 39 /r, with a REX prefix for r8-r15.
    if (body[i] == 0x39)
      if (auto x = rip_operand(body, at, i + 1, 6)) compared.push_back(*x);
    if (rex && body[i + 1] == 0x39)
      if (auto x = rip_operand(body, at, i + 2, 7)) compared.push_back(*x);
    // mov disp32(%rip),%r64: REX.W 8b /r.
    if (rex && (body[i] & 0x08) && body[i + 1] == 0x8b)
      if (auto x = rip_operand(body, at, i + 2, 7)) loaded.push_back(*x);
  }
  for (uint64_t x : compared) {
    const uint64_t symbols = x - l.symbols_last_id;
    if (std::find(loaded.begin(), loaded.end(), symbols + l.symbols_ids) != loaded.end())
      return symbols;
  }
  return std::nullopt;
}

std::variant<RubyLibrary, RubyRejection> inspect_ruby_library(const std::string& readable_path,
                                                              RubyVersion version) {
  const std::string prefix =
      "ruby " + std::to_string(version.major) + "." + std::to_string(version.minor) + ": ";
  const RubyLayout* layout = ruby_layout(version);
  if (!layout) return RubyRejection{prefix + "no layout for this version, frames not read"};
  std::string error;
  std::shared_ptr<const ElfFile> elf = ElfFile::open(readable_path, &error, ElfContents::kLayout);
  const UniqueFd fd =
      open_untrusted(readable_path, UntrustedKind::kBinary, std::nullopt, Copying::kNever).fd;
  if (!elf || !fd) return RubyRejection{prefix + "cannot read the library " + error};
  const auto symbols =
      read_dynamic_symbols(fd.get(), {"ruby_current_vm_ptr", "rb_vm_exec", "rb_id2str"});
  auto defined = [&](const char* name) -> const DynamicSymbol* {
    auto it = symbols.find(name);
    return it == symbols.end() || !it->second.defined ? nullptr : &it->second;
  };
  const DynamicSymbol* vm = defined("ruby_current_vm_ptr");
  const DynamicSymbol* exec = defined("rb_vm_exec");
  if (!vm || !exec || exec->size == 0)
    return RubyRejection{prefix + "not a CRuby library (no ruby_current_vm_ptr or rb_vm_exec)"};
  auto read_code = [&](uint64_t vaddr, size_t size) {
    std::vector<uint8_t> bytes(size);
    const std::optional<uint64_t> offset = elf->vaddr_to_file_offset(vaddr);
    bytes.resize(offset ? pread_up_to(fd.get(), bytes.data(), size, *offset) : 0);
    return bytes;
  };
  const DynamicSymbol* id2str = defined("rb_id2str");
  const uint64_t global_symbols =
      id2str ? find_ruby_global_symbols(read_code, id2str->address, *layout).value_or(0) : 0;
  return RubyLibrary{std::move(elf), layout,     vm->address,
                     exec->address,  exec->size, global_symbols};
}

bpfprof_ruby_process RubyInterpreter::bpf_entry() const {
  const RubyLayout& l = *layout;
  return bpfprof_ruby_process{
      .vm_pointer = vm_pointer,
      .vm_main_ractor = l.vm_main_ractor,
      .ractor_threads_head = l.ractor_threads_head,
      .thread_native_id = l.thread_native_id,
      .thread_ec = l.thread_ec,
      .ec_vm_stack = l.ec_vm_stack,
      .ec_vm_stack_size = l.ec_vm_stack_size,
      .ec_cfp = l.ec_cfp,
      .frame_pc = l.frame_pc,
      .frame_iseq = l.frame_iseq,
      .frame_ep = l.frame_ep,
      .frame_size = l.frame_size,
      .frame_magic_mask = l.frame_magic_mask,
      .frame_magic_cfunc = l.frame_magic_cfunc,
      .ep_method_entry = l.ep_method_entry,
      .reserved = 0,
  };
}

// One mapping of the library gives its load bias (start and file offset).
void RubyProcesses::on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) {
  const std::optional<RubyVersion> version = ruby_version_from_file_name(base_name(mapping.path));
  if (!version || contains(pid)) return;
  auto key = std::pair{mapping.path, mapping.inode};
  auto it = libraries_.find(key);
  if (it == libraries_.end())
    it = libraries_.emplace(std::move(key), inspect_ruby_library(mapping.readable_path(), *version))
             .first;
  if (const auto* rejected = std::get_if<RubyRejection>(&it->second)) {
    stats.not_read.emplace(mapping.path, rejected->reason);
    return;
  }
  const RubyLibrary& library = std::get<RubyLibrary>(it->second);
  const std::optional<uint64_t> vaddr = library.elf->file_offset_to_vaddr(mapping.file_offset);
  if (!vaddr) return;
  const uint64_t bias = mapping.start - *vaddr;
  const RubyInterpreter interpreter{
      .layout = library.layout,
      .vm_pointer = library.vm_pointer + bias,
      .global_symbols = library.global_symbols ? library.global_symbols + bias : 0,
      .exec_start = library.exec_start + bias,
      .exec_end = library.exec_start + bias + library.exec_size};
  add(pid, interpreter, interpreter.bpf_entry());
}

}  // namespace bpfprof
