// Files by build-id from the debuginfod servers of $DEBUGINFOD_URLS (libdebuginfod), for a
// profile served where its libraries are no longer on disk. libdwfl asks the same servers
// for debug information by itself (the recorder's and the symbolizer's DWARF).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "symbols/util/unique_handle.h"

struct debuginfod_client;

namespace bpfprof {

class Debuginfod {
 public:
  // nullptr when $DEBUGINFOD_URLS is unset or empty.
  static std::unique_ptr<Debuginfod> from_environment();

  // The path of the file in debuginfod's local cache, fetched if needed; nullopt if no server
  // has it.
  std::optional<std::string> executable(const std::string& build_id_hex);
  std::optional<std::string> debuginfo(const std::string& build_id_hex);

 private:
  struct ClientCloser {
    void operator()(debuginfod_client* client) const noexcept;
  };
  using Client = UniqueHandle<debuginfod_client*, ClientCloser>;
  explicit Debuginfod(Client client) : client_(std::move(client)) {}
  Client client_;
};

}  // namespace bpfprof
