#include "runtimes/perl/processes.h"

#include <optional>
#include <utility>

namespace bpfprof {

bpfprof_perl_process PerlInterpreter::bpf_entry() const {
  const PerlLayout& l = *layout;
  return bpfprof_perl_process{.tls_offset = tls_offset,
                              .interp_stack_sp = kPerlInterpStackSp,
                              .interp_op = l.interp_op,
                              .interp_curcop = l.interp_curcop,
                              .interp_curstackinfo = l.interp_curstackinfo,
                              .si_cxstack = l.si_cxstack,
                              .si_prev = l.si_prev,
                              .si_cxix = l.si_cxix,
                              .si_type = l.si_type,
                              .si_stack = l.si_stack,
                              .av_fill = l.xav_fill,
                              .sv_u = l.sv_u,
                              .cx_size = l.cx_size,
                              .cx_type = l.cx_type,
                              .cx_u16 = l.cx_u16,
                              .cx_oldcop = l.cx_oldcop,
                              .cx_retop = l.cx_sub_retop,
                              .cx_sub_cv = l.cx_sub_cv,
                              .cx_eval_namesv = l.cx_eval_namesv,
                              .cx_eval_cv = l.cx_eval_cv,
                              .cop_line = l.cop_line,
                              .cop_file = l.cop_file,
                              .sv_flags = l.sv_flags,
                              .xcv_gv_u = l.xcv_gv_u,
                              .op_type = kPerlOpTypeOffset,
                              .op_entersub = kPerlOpEntersub,
                              .op_require = kPerlOpRequire};
}

// One mapping of the executable gives its load bias (start and file offset).
void PerlProcesses::on_mapping(Pid pid, const MappingInfo& mapping, RuntimeStats& stats) {
  if (contains(pid)) return;
  auto key = std::tuple{mapping.path, mapping.inode, mapping.build_id};
  auto it = binaries_.find(key);
  if (it == binaries_.end())
    it = binaries_.emplace(std::move(key), inspect_perl_binary(mapping.readable_path())).first;
  if (const auto* rejected = std::get_if<PerlRejection>(&it->second)) {
    stats.not_read.emplace(mapping.path, rejected->reason);
    return;
  }
  const PerlBinary& binary = std::get<PerlBinary>(it->second);
  if (!binary.tls_offset) {
    stats.not_read.emplace(mapping.path,
                           "perl: a library's interpreter (libperl.so) is not read, subs not read");
    return;
  }
  const std::optional<uint64_t> vaddr = binary.elf->file_offset_to_vaddr(mapping.file_offset);
  if (!vaddr) return;
  const uint64_t bias = mapping.start - *vaddr;
  const PerlInterpreter interpreter{.layout = binary.layout,
                                    .tls_offset = *binary.tls_offset,
                                    .runops_start = binary.runops_start + bias,
                                    .runops_end = binary.runops_end + bias};
  add(pid, interpreter, interpreter.bpf_entry());
}

}  // namespace bpfprof
