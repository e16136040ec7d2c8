// CRuby (3.1) as a runtime (runtimes/runtime.h): its interpreters found by
// runtimes/ruby/processes.h, their control frames read by runtimes/ruby/frames.bpf.h, named by
// runtimes/ruby/iseqs.h and merged in place of the native rb_vm_exec frames.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "runtimes/python/stacks.h"
#include "runtimes/runtime.h"

namespace bpfprof {

// `native`: a user stack, innermost first; `ruby`: the Ruby frames, innermost first, each
// call of the VM loop's frames ending at its `entry` frame. The calls go in place of the
// native frames for which `runs_vm_loop` holds, matched from the outermost: a sample taken
// while a call is entered or left (its frame pushed before rb_vm_exec runs, or popped before
// it returns) differs from the native stack at the leaf only, so the outer calls keep their
// places; the calls or VM loop frames left over at the leaf are dropped or stay native, and
// make the stack `mismatched`.
MergedStack merge_ruby_frames(std::span<const uint64_t> native,
                              std::span<const ActivationFrame> ruby,
                              const std::function<bool(uint64_t)>& runs_vm_loop);

std::unique_ptr<Runtime> make_ruby_runtime();

}  // namespace bpfprof
