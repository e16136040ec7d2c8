// Names of the Zend engine's functions as a PHP process's memory holds them (all of it the
// process's to write): a frame's zend_function gives `Class::method`, `function`, `{closure}`,
// `{main}` for a script's top-level code, `{include}` for an included file's and `{eval}` for
// eval'd code, with the source file and first line of user code. Bounded reads only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runtimes/kit/remote_memory.h"
#include "runtimes/php/events.h"
#include "runtimes/php/layout.h"
#include "userspace/model/recording.h"

namespace bpfprof {

// The longest name or path read; a longer one is cut and marked.
inline constexpr size_t kMaxPhpText = 1024;

// A zend_string's text at `address`: at most kMaxPhpText bytes, "…" where cut.
std::optional<std::string> read_php_string(RemoteReader& reader, const PhpLayout& layout,
                                           uint64_t address);

// The function a frame ran, named; nullopt where its memory cannot be read.
std::optional<RuntimeFunction> read_php_function(RemoteReader& reader, const PhpLayout& layout,
                                                 const bpfprof_php_frame& frame);

}  // namespace bpfprof
