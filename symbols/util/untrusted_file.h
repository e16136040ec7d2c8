// The one way bpfprof opens a file that someone other than root may control: perf maps in
// /tmp, binaries and libraries any user can build and map, debug files, runtime metadata,
// the unwind-table cache. bpfprof runs as root, so such a file must never hang it, fill its
// memory, crash it or put another user's words into an administrator's profile:
//
// - opened with O_NONBLOCK (a FIFO never blocks), then fstat'ed on the open descriptor:
//   regular files only (no FIFO, device, socket or directory);
// - in a world-writable directory (/tmp) the last component is opened with O_NOFOLLOW: a
//   link planted there is refused, never followed;
// - a size cap per kind of file, said with the cap in the refusal;
// - where a convention names the file after a process (perf maps), it must belong to that
//   process's user or root and not be writable by others (perf's rule);
// - a file that another user could still change (owned by a user other than root or
//   bpfprof's own, or writable by group or others) is copied once into a sealed memfd and read from
//   there, up to a budget for all such copies: a truncation while libelf or libdw maps it cannot
//   raise SIGBUS, and what is read is one consistent version of the file.
//
// Every refusal is recorded once (untrusted_file_refusals()) for the end-of-run summary and
// the profile's meta.extra.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symbols/util/unique_handle.h"

namespace bpfprof {

enum class UntrustedKind : uint8_t {
  kBinary,           // executables and shared libraries (also through /proc/PID/...)
  kDebugFile,        // separate debug info: --symbol-dir, .build-id, debuglink, debuginfod
  kPerfMap,          // /tmp/perf-PID.map
  kJitDump,          // jit-PID.dump
  kRuntimeMetadata,  // a runtime's own description files
  kUnwindCache,      // bpfprof's cache of unwind tables
  kSource,           // source files embedded in a profile
};

// "perf map", "binary", ...: how a refusal names the file.
std::string_view untrusted_kind_name(UntrustedKind kind);
// The largest file of a kind that is read at all.
uint64_t untrusted_size_cap(UntrustedKind kind);

enum class RefusalReason : uint8_t {
  kNotRegular,        // a FIFO, device, socket or directory
  kTooLarge,          // over the kind's size cap
  kLinkInSharedDir,   // a symbolic link in a world-writable directory
  kForeignOwner,      // owned by neither the process's user nor root
  kWritableByOthers,  // mode o+w
  kCopyBudgetUsed,    // a copy would pass the budget for copies of changeable files
};

struct Refusal {
  RefusalReason reason;
  std::string message;  // one line: "perf map /tmp/perf-1.map ignored: owned by uid 65534, ..."
};

// Who must own a file named after a process: that process's effective user, or root.
struct OwnerRule {
  uint32_t process_uid = 0;
};

// Whether a binary or debug file that a user could still change is copied: kNever for a
// caller that only preads a few parts of it (read_elf_build_id, read_dynamic_symbols) and
// maps nothing.
enum class Copying : uint8_t { kWhenChangeable, kNever };

struct UntrustedOpen {
  UniqueFd fd;                     // valid when the file may be read; at offset 0
  uint64_t size = 0;               // its size when opened (a snapshot's size for a copy)
  bool copied = false;             // fd is a sealed memfd holding a copy of the file
  std::optional<Refusal> refusal;  // set when the file exists but is refused
};

// Opens `path` as a file of `kind` under the rules above. A missing or unreadable file gives
// neither fd nor refusal. Refusals are also recorded (said once).
UntrustedOpen open_untrusted(const std::string& path, UntrustedKind kind,
                             std::optional<OwnerRule> owner = std::nullopt,
                             Copying copying = Copying::kWhenChangeable);
// `path` as the process whose root directory is `root` (/proc/PID/root) sees it: links are
// resolved inside that root, never out of it onto the host's files.
UntrustedOpen open_untrusted_in_root(const std::string& root, const std::string& path,
                                     UntrustedKind kind);

// A path's whole contents, read from one descriptor: at most the size it had when opened
// (a file that grows meanwhile is read up to that point). nullopt when missing or refused.
std::optional<std::string> read_untrusted(const std::string& path, UntrustedKind kind,
                                          std::optional<OwnerRule> owner = std::nullopt);

// A source file's contents when it has at most `max_bytes` (nullopt: refused, larger, or
// unreadable); a file over `max_bytes` but within the kind's cap is not a refusal.
std::optional<std::string> read_regular_file(const std::string& path, uint64_t max_bytes);

// Whether only root (or bpfprof's own user) can have written the file open as `fd`: owned by
// one of them and writable by neither group nor others. Only then is what the file says of
// itself (a build-id) to be believed: any user can build a file that claims another's
// build-id. False for our copies of other users' files.
bool written_by_us_or_root_only(int fd);

// Whether `path`'s directory is one every user may write to (/tmp, /dev/shm): a name there
// may be a link another user planted.
bool in_world_writable_directory(const std::string& path);

// The effective uid of a running process (from /proc/PID/status), nullopt when gone.
std::optional<uint32_t> process_effective_uid(int pid);

// Every refusal of this run so far, each message once, in the order first seen.
std::vector<std::string> untrusted_file_refusals();
// How many opens were refused in all (a repeated refusal counts each time).
uint64_t untrusted_file_refusal_count();
// Bytes of other users' files read from copies so far (at most 2 GiB in a run).
uint64_t untrusted_copy_bytes();
// For tests: forget the refusals and copies counted so far.
void reset_untrusted_file_log();

}  // namespace bpfprof
