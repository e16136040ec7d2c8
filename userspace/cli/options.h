// The command line: which subcommand, with which options. Parsing reports errors as one
// line and an exit status instead of exiting, so that it can be tested.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "userspace/session/convert.h"
#include "userspace/session/recorder.h"
#include "userspace/session/replay.h"
#include "userspace/session/serve.h"

namespace bpfprof {

// --help or --version: the text to print on stdout, exit status 0.
struct InformationRequest {
  std::string text;
};
// A bad command line: the one-line message for stderr, and the exit status.
struct UsageError {
  std::string message;
  int status = 2;
};
using ParsedCommandLine = std::variant<RecordOptions, ReplayOptions, ServeOptions, ConvertOptions,
                                       InformationRequest, UsageError>;

ParsedCommandLine parse_command_line(int argc, const char* const* argv);

// --switch-output, --flight-recorder: seconds from "90", "90s", "5m" or "1h".
std::optional<double> parse_duration(const std::string& text);

// --buffer-size: a power of two from 64K to 1G, with an optional K, M or G suffix.
std::optional<uint32_t> parse_ring_buffer_size(const std::string& text);

// --call-graph fp | dwarf[,SIZE] | dwarf-copy[,SIZE]: sets user_stack_copy_bytes,
// fixed_stack_copy_size and call_graph.
// nullopt on success, else the message.
std::optional<std::string> apply_call_graph(const std::string& text, RecordOptions& options);

}  // namespace bpfprof
