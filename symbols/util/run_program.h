// Runs a helper program (dpkg-query, the dynamic loader's --list) and reads what it prints.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace bpfprof {

// Whether a program's output counts only when it exits with status 0.
enum class ExitStatus { kMustBeZero, kAny };

// The standard output of `argv` (argv[0] found in PATH; no shell), its standard error
// discarded; nullopt if it could not run, did not exit with status 0 (unless `status` is
// kAny and it exited), or ran past `timeout` (then it is killed).
std::optional<std::string> program_output(const std::vector<std::string>& argv,
                                          std::chrono::milliseconds timeout,
                                          ExitStatus status = ExitStatus::kMustBeZero);

}  // namespace bpfprof
