// What a Go program's thread did, for its name: Go names none of its threads (each has the
// program's name), and an M runs whichever goroutine the scheduler gives it, so the profile
// names a thread after what most of its samples ran: a goroutine's function (the frame above
// runtime.goexit), the runtime's own loops (runtime.sysmon, runtime.templateThread, the
// scheduler), or work on the system stack.
#pragma once

#include <optional>
#include <string>

#include "userspace/output/profile_tables.h"

namespace bpfprof {

// The role of the thread whose samples are `samples`, when at least half of their weight is
// in stacks that begin at a Go root; nullopt for any other thread.
std::optional<std::string> go_thread_role(const SharedTables& shared, const SamplesTable& samples);

}  // namespace bpfprof
