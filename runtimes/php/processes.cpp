#include "runtimes/php/processes.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "runtimes/kit/release.h"
#include "runtimes/kit/remote_memory.h"
#include "symbols/dwarf/cfi_spans.h"
#include "symbols/util/text.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {
namespace {

// PHP binaries are some tens of MB; a larger file named like one is not searched.
constexpr uint64_t kMaxPhpBinaryBytes = uint64_t{256} << 20;

// The release the binary carries in its X-Powered-By header, and whether it is thread-safe
// (its extension API string: "API420220829,NTS" or ",TS").
struct PhpBuild {
  std::optional<PhpVersion> version;
  bool thread_safe = false;
};

PhpBuild php_build_of(int fd, uint64_t size) {
  PhpBuild build;
  if (size == 0 || size > kMaxPhpBinaryBytes) return build;
  constexpr std::string_view kPoweredBy = "X-Powered-By: PHP/";
  constexpr std::string_view kThreadSafe(",TS\0", 4);  // "API420220829,TS", NUL-terminated
  constexpr size_t kReleaseChars = 24;                 // "PHP/" and the release
  bool release_seen = false, api_seen = false;         // the first of each decides
  scan_file_text(fd, size, [&](std::string_view bytes) {
    // One cut at the piece's end is whole at the next one's start.
    if (const size_t at = bytes.find(kPoweredBy);
        !release_seen && at != std::string_view::npos &&
        at + kPoweredBy.size() - 4 + kReleaseChars <= bytes.size()) {
      release_seen = true;
      build.version = parse_php_version(bytes.substr(at + kPoweredBy.size() - 4, kReleaseChars));
    }
    if (const size_t api = bytes.find(kThreadSafe); !api_seen && api != std::string_view::npos) {
      api_seen = true;
      build.thread_safe = api >= 12 && bytes.substr(api - 12, 3) == "API";
    }
    return release_seen && api_seen;
  });
  return build;
}

}  // namespace

bool is_php_file_name(std::string_view base) {
  auto version_suffix = [](std::string_view rest) {
    return std::all_of(rest.begin(), rest.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
    });
  };
  for (std::string_view program : {"php-fpm", "php-cgi", "php"})
    if (base.starts_with(program) && version_suffix(base.substr(program.size()))) return true;
  if (base.starts_with("libphp") && base.find(".so") != std::string_view::npos) {
    const std::string_view version = base.substr(6, base.find(".so") - 6);
    return version_suffix(version);
  }
  return false;
}

std::optional<PhpVersion> parse_php_version(std::string_view text) {
  if (!text.starts_with("PHP/")) return std::nullopt;
  return parse_release(text.substr(4));
}

const PhpLayout* php_layout(const PhpVersion& version) {
  if (version.major == 8 && version.minor == 2) return &kPhp82;
  return nullptr;
}

std::variant<PhpBinary, PhpRejection> inspect_php_binary(const std::string& readable_path) {
  // Mapped below (execute_ex's CFI): a copy when another user could truncate the file
  // meanwhile, which would raise SIGBUS in a mapping of it.
  const UntrustedOpen opened = open_untrusted(readable_path, UntrustedKind::kBinary);
  if (!opened.fd) return PhpRejection{"PHP: cannot read the binary"};
  const auto symbols = read_dynamic_symbols(
      opened.fd.get(),
      {"executor_globals", "execute_ex", "zend_vm_kind", "executor_globals_offset"});
  auto defined = [&](const char* name) -> const DynamicSymbol* {
    auto it = symbols.find(name);
    return it == symbols.end() || !it->second.defined ? nullptr : &it->second;
  };
  const PhpBuild build = php_build_of(opened.fd.get(), opened.size);
  if (defined("executor_globals_offset") || build.thread_safe)
    return PhpRejection{"PHP: a thread-safe (ZTS) build, frames not read"};
  const DynamicSymbol* globals = defined("executor_globals");
  const DynamicSymbol* exec = defined("execute_ex");
  if (!globals || !exec || exec->size == 0)
    return PhpRejection{"PHP: no executor_globals or execute_ex exported, frames not read"};
  if (!build.version) return PhpRejection{"PHP: no release found in the binary, frames not read"};
  const PhpLayout* layout = php_layout(*build.version);
  if (!layout)
    return PhpRejection{"PHP " + std::to_string(build.version->major) + "." +
                        std::to_string(build.version->minor) +
                        ": no layout for this release, frames not read"};
  std::string error;
  std::shared_ptr<const ElfFile> elf = ElfFile::open(readable_path, &error, ElfContents::kLayout);
  if (!elf) return PhpRejection{"PHP: " + error};
  return PhpBinary{std::move(elf), layout,     globals->address,
                   exec->address,  exec->size, function_body_rule(opened.fd.get(), exec->address)};
}

bool is_php_jit_buffer(const std::string& path) { return path == "/dev/zero (deleted)"; }

bpfprof_php_process PhpInterpreter::bpf_entry() const {
  const PhpLayout& l = *layout;
  const bool walk_jit = vm_rule && jit_start < jit_end;
  return bpfprof_php_process{.current_execute_data = executor_globals + l.eg_current_execute_data,
                             .vm_low = exec_start,
                             .vm_high = exec_end,
                             .jit_low = walk_jit ? jit_start : 0,
                             .jit_high = walk_jit ? jit_end : 0,
                             .trace_exit_low = trace_exit ? trace_exit->start : 0,
                             .trace_exit_high = trace_exit ? trace_exit->end : 0,
                             .trace_exit_moved_by = trace_exit ? trace_exit->moved_by : 0,
                             .vm_rule = vm_rule.value_or(bpfprof_unwind_rule{}),
                             .ex_opline = l.ex_opline,
                             .ex_func = l.ex_func,
                             .ex_call_info = l.ex_call_info,
                             .ex_prev = l.ex_prev,
                             .func_name = l.func_name,
                             .func_scope = l.func_scope,
                             .op_array_last = l.op_array_last,
                             .op_array_filename = l.op_array_filename,
                             .op_lineno = l.op_lineno,
                             .op_size = l.op_size};
}

// One mapping of the binary gives its load bias (start and file offset).
void PhpProcesses::on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) {
  if (is_php_jit_buffer(mapping.path)) return on_jit_buffer(pid, mapping);
  if (contains(pid)) return;
  auto key = std::tuple{mapping.path, mapping.inode, mapping.build_id};
  auto it = binaries_.find(key);
  if (it == binaries_.end())
    it = binaries_.emplace(std::move(key), inspect_php_binary(mapping.readable_path())).first;
  if (const auto* rejected = std::get_if<PhpRejection>(&it->second)) {
    stats.not_read.emplace(mapping.path, rejected->reason);
    return;
  }
  const PhpBinary& binary = std::get<PhpBinary>(it->second);
  const std::optional<uint64_t> vaddr = binary.elf->file_offset_to_vaddr(mapping.file_offset);
  if (!vaddr) return;
  const uint64_t bias = mapping.start - *vaddr;
  PhpInterpreter interpreter{.layout = binary.layout,
                             .executor_globals = binary.executor_globals + bias,
                             .exec_start = binary.exec_start + bias,
                             .exec_end = binary.exec_start + bias + binary.exec_size,
                             .jit_start = 0,
                             .jit_end = 0,
                             .trace_exit = std::nullopt,
                             .vm_rule = binary.vm_rule};
  if (auto jit = jit_buffers_.find(pid); jit != jit_buffers_.end()) {
    interpreter.jit_start = jit->second.start;
    interpreter.jit_end = jit->second.end;
    interpreter.trace_exit = jit->second.trace_exit;
  }
  add(pid, interpreter, interpreter.bpf_entry());
}

// opcache maps its JIT buffer as it starts, before or after the binary's mappings are read;
// a PHP process that has one already is told again, with its JIT code. The stubs at the
// buffer's start are written by then (opcache makes the buffer executable after writing them).
void PhpProcesses::on_jit_buffer(Pid pid, const MappingInfo& mapping) {
  JitBuffer buffer{mapping.start, mapping.start + mapping.length, std::nullopt};
  // Made executable again after each compilation: once its stub is found, nothing is new.
  if (auto known = jit_buffers_.find(pid);
      known != jit_buffers_.end() && known->second.start == buffer.start &&
      known->second.end == buffer.end && known->second.trace_exit && contains(pid))
    return;
  std::vector<uint8_t> stubs(std::min<uint64_t>(mapping.length, kPhpJitStubBytes));
  ProcessMemory memory(pid);
  if (memory.read(mapping.start, stubs.data(), stubs.size()))
    if (std::optional<PhpMovedStretch> found = find_trace_exit(stubs))
      buffer.trace_exit = PhpMovedStretch{found->start + mapping.start, found->end + mapping.start,
                                          found->moved_by};
  jit_buffers_[pid] = buffer;
  const PhpInterpreter* known = find(pid);
  if (!known) return;
  PhpInterpreter updated = *known;
  updated.jit_start = buffer.start;
  updated.jit_end = buffer.end;
  updated.trace_exit = buffer.trace_exit;
  replace(pid, updated, updated.bpf_entry());
}

}  // namespace bpfprof
