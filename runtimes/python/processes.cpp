#include "runtimes/python/processes.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include "runtimes/kit/x86_code.h"
#include "symbols/elf/elf_file.h"
#include "symbols/util/read_file.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {

namespace {

// "3.11" at the start of `text`, and what follows it.
std::optional<std::pair<PythonVersion, std::string_view>> parse_version(std::string_view text) {
  PythonVersion v;
  const char* end = text.data() + text.size();
  auto [dot, major_error] = std::from_chars(text.data(), end, v.major);
  if (major_error != std::errc() || dot == end || *dot != '.') return std::nullopt;
  auto [rest, minor_error] = std::from_chars(dot + 1, end, v.minor);
  if (minor_error != std::errc()) return std::nullopt;
  return std::pair{v, std::string_view(rest, static_cast<size_t>(end - rest))};
}

std::string version_text(PythonVersion v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor);
}

// `size` bytes of the file at virtual address `vaddr` (initialized data: PyCode_Type,
// Py_Version), or nothing.
std::optional<uint64_t> read_file_word(int fd, const ElfFile& elf, uint64_t vaddr, size_t size) {
  uint64_t value = 0;
  if (size > sizeof(value) || !read_file_at_vaddr(fd, elf, vaddr, &value, size))
    return std::nullopt;
  return value;
}

// 3.6 keeps its interpreters' list in a static, interp_head, that PyInterpreterState_Head
// returns (`mov interp_head(%rip),%rax; ret`): its address.
std::optional<uint64_t> interpreter_head_static(int fd, const ElfFile& elf,
                                                const DynamicSymbol* head_function) {
  constexpr size_t kCodeBytes = 16;
  const std::optional<uint64_t> offset =
      head_function ? elf.vaddr_to_file_offset(head_function->address) : std::nullopt;
  uint8_t code[kCodeBytes];
  if (!offset || !pread_exact(fd, code, sizeof(code), *offset)) return std::nullopt;
  return first_rip_target(code, head_function->address);
}

// The version the binary states (Py_Version, 3.11 and later) must be the one of its name.
std::optional<PythonRejection> check_stated_version(int fd, const ElfFile& elf,
                                                    const DynamicSymbol* py_version,
                                                    PythonVersion named) {
  if (!py_version) return std::nullopt;  // before 3.11: the name is all there is
  const std::optional<uint64_t> hex = read_file_word(fd, elf, py_version->address, 4);
  if (!hex) return PythonRejection{"Py_Version unreadable"};
  const PythonVersion stated{static_cast<int>(*hex >> 24 & 0xff),
                             static_cast<int>(*hex >> 16 & 0xff)};
  if (stated == named) return std::nullopt;
  return PythonRejection{"named " + version_text(named) + " but Py_Version says " +
                         version_text(stated)};
}

}  // namespace

std::optional<PythonVersion> python_version_from_file_name(std::string_view name) {
  for (std::string_view prefix : {"python", "libpython"}) {
    if (!name.starts_with(prefix)) continue;
    auto parsed = parse_version(name.substr(prefix.size()));
    if (!parsed) return std::nullopt;
    std::string_view rest = parsed->second;
    // Up to 3.7 a pymalloc build's ABI flag "m" (python3.7m, libpython3.7m.so) names the
    // usual layout; debug ("d") and free-threaded ("t") builds have others: not these entries.
    if (rest.starts_with('m') && parsed->first.major == 3 && parsed->first.minor <= 7)
      rest.remove_prefix(1);
    if (prefix == "python" ? rest.empty() : rest.starts_with(".so")) return parsed->first;
    return std::nullopt;
  }
  return std::nullopt;
}

PythonInspection inspect_python_binary(const std::string& readable_path,
                                       PythonVersion named_version) {
  const std::string version = "python " + version_text(named_version) + ": ";
  const PythonLayout* layout = python_layout(named_version);
  if (!layout) return PythonRejection{version + "no layout for this version, frames not read"};
  std::string error;
  std::shared_ptr<const ElfFile> elf = ElfFile::open(readable_path, &error, ElfContents::kLayout);
  const UniqueFd fd =
      open_untrusted(readable_path, UntrustedKind::kBinary, std::nullopt, Copying::kNever).fd;
  if (!elf || !fd) return PythonRejection{version + "cannot read the binary " + error};
  const auto symbols =
      read_dynamic_symbols(fd.get(), {"_PyRuntime", "PyInterpreterState_Head", "PyCode_Type",
                                      "_PyEval_EvalFrameDefault", "Py_Version", "Py_BytesMain",
                                      "_Py_UnixMain", "Py_Main", "PyUnicode_Type", "PyBytes_Type"});
  auto symbol = [&](const char* name) -> const DynamicSymbol* {
    auto it = symbols.find(name);
    return it == symbols.end() || !it->second.defined ? nullptr : &it->second;
  };
  // The launcher of a shared build calls the library's main (Py_BytesMain; 3.7: _Py_UnixMain;
  // 3.6: Py_Main).
  for (const char* main_function : {"Py_BytesMain", "_Py_UnixMain", "Py_Main"})
    if (auto main = symbols.find(main_function); main != symbols.end() && !main->second.defined)
      return PythonLauncher{};
  // What holds the interpreters' list: _PyRuntime, or 3.6's interp_head (a symbol of our own).
  DynamicSymbol head;
  const DynamicSymbol* runtime = symbol("_PyRuntime");
  if (layout->runtime == PythonRuntimeState::kInterpreterHeadStatic) {
    const std::optional<uint64_t> address =
        interpreter_head_static(fd.get(), *elf, symbol("PyInterpreterState_Head"));
    head = DynamicSymbol{.address = address.value_or(0), .size = 8, .defined = true};
    runtime = address ? &head : nullptr;
  }
  const DynamicSymbol* code_type = symbol("PyCode_Type");
  const DynamicSymbol* eval = symbol("_PyEval_EvalFrameDefault");
  if (!runtime || !code_type || !eval)
    return PythonRejection{version +
                           "not a CPython interpreter (no _PyRuntime, PyCode_Type or "
                           "_PyEval_EvalFrameDefault)"};
  if (auto wrong = check_stated_version(fd.get(), *elf, symbol("Py_Version"), named_version))
    return PythonRejection{version + wrong->reason};
  if (runtime->size < layout->runtime_min_size)
    return PythonRejection{version + "_PyRuntime is smaller than the layout reads"};
  if (auto wrong = check_debug_offsets(fd.get(), *elf, runtime->address, *layout))
    return PythonRejection{version + wrong->reason};
  const std::optional<uint64_t> code_size =
      read_file_word(fd.get(), *elf, code_type->address + layout->type_basic_size, 8);
  if (!code_size || *code_size != layout->code_size)
    return PythonRejection{version + "code objects are not laid out as expected (tp_basicsize " +
                           (code_size ? std::to_string(*code_size) : "unreadable") + ")"};
  const DynamicSymbol* str_type = symbol("PyUnicode_Type");
  const DynamicSymbol* bytes_type = symbol("PyBytes_Type");
  return PythonBinary{std::move(elf),
                      layout,
                      runtime->address,
                      code_type->address,
                      eval->address,
                      eval->size,
                      str_type ? str_type->address : 0,
                      bytes_type ? bytes_type->address : 0};
}

// 3.13+: the offsets the binary states in _Py_DebugOffsets, at the start of _PyRuntime's
// initial contents, must be the table's.
std::optional<PythonRejection> check_debug_offsets(int fd, const ElfFile& elf, uint64_t runtime,
                                                   const PythonLayout& layout) {
  const auto checks = python_debug_offset_checks(layout.version);
  if (checks.empty()) return std::nullopt;
  const std::optional<uint64_t> cookie = read_file_word(fd, elf, runtime, 8);
  if (!cookie || memcmp(&*cookie, "xdebugpy", 8) != 0)
    return PythonRejection{"no _Py_DebugOffsets at the start of _PyRuntime"};
  for (const DebugOffsetCheck& check : checks) {
    const std::optional<uint64_t> stated = read_file_word(fd, elf, runtime + check.position, 8);
    if (!stated || *stated != layout.*check.field)
      return PythonRejection{"_Py_DebugOffsets says " + std::string(check.name) + " is at " +
                             (stated ? std::to_string(*stated) : "?") + ", the layout table " +
                             std::to_string(layout.*check.field)};
  }
  return std::nullopt;
}

bpfprof_python_process PythonInterpreter::bpf_entry() const {
  const PythonLayout& l = *layout;
  return bpfprof_python_process{
      .runtime = runtime,
      .runtime_interpreters_head = l.runtime_interpreters_head,
      .interpreter_threads_head = l.interpreter_threads_head,
      .thread_next = l.thread_next,
      .thread_native_id = l.thread_native_id,
      .thread_frame = l.thread_frame,
      .frame_anchor = static_cast<__u32>(l.frame_anchor),
      .cframe_current_frame = l.cframe_current_frame,
      .frame_code = l.frame_code,
      .frame_previous = l.frame_previous,
      .frame_prev_instr = l.frame_prev_instr,
      .frame_entry = l.frame_entry,
      .entry_marking = static_cast<__u32>(l.entry_marking),
      .shim_owner = l.shim_owner,
      .code_first_line = l.code_first_line,
      .code_instructions = l.code_instructions,
      .instruction_form = static_cast<__u32>(l.instruction_form),
      .thread_key = static_cast<__u32>(l.thread_key),
  };
}

const PythonInspection& PythonProcesses::binary_for(const MappingInfo& mapping,
                                                    PythonVersion version) {
  const std::string& readable = mapping.readable_path();
  auto key = std::pair{mapping.path, mapping.inode};
  auto it = binaries_.find(key);
  if (it == binaries_.end())
    it = binaries_.emplace(std::move(key), inspect_python_binary(readable, version)).first;
  return it->second;
}

// One mapping of the interpreter's file is enough: the whole file is loaded with one bias,
// which the mapping's start and file offset give.
void PythonProcesses::on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) {
  const std::optional<PythonVersion> version =
      python_version_from_file_name(base_name(mapping.path));
  if (!version || contains(pid)) return;
  const auto& binary = binary_for(mapping, *version);
  if (const auto* rejected = std::get_if<PythonRejection>(&binary))
    stats.not_read.emplace(mapping.path, rejected->reason);
  if (!std::holds_alternative<PythonBinary>(binary)) return;
  const PythonBinary& b = std::get<PythonBinary>(binary);
  const std::optional<uint64_t> vaddr = b.elf->file_offset_to_vaddr(mapping.file_offset);
  if (!vaddr) return;
  const uint64_t bias = mapping.start - *vaddr;
  auto placed = [&](uint64_t address) { return address ? address + bias : 0; };
  const PythonInterpreter interpreter{b.layout,
                                      b.runtime + bias,
                                      b.code_type + bias,
                                      b.eval_start + bias,
                                      b.eval_start + bias + b.eval_size,
                                      placed(b.str_type),
                                      placed(b.bytes_type)};
  add(pid, interpreter, interpreter.bpf_entry());
}

}  // namespace bpfprof
