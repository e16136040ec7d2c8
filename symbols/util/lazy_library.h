// A shared library opened when first used (dlopen), not when bpfprof starts: the libraries a
// recording rarely needs (the disassembler, the HTTP client, debuginfod's client and all they
// pull in: TLS, Kerberos, LDAP) cost a recording neither their pages nor their relocations.
// Each is reached through shims of the functions bpfprof calls, with the library's own
// signatures (its *_on_demand.cpp, each with one `constinit` LazyLibrary), so that the callers
// read as with a linked library.
#pragma once

#include <mutex>
#include <string>

namespace bpfprof {

class LazyLibrary {
 public:
  // `lost`: what goes undone without the library, said once on stderr with why at the first
  // lookup that fails; nullptr when the callers say it themselves.
  constexpr LazyLibrary(const char* soname, const char* lost) : soname_(soname), lost_(lost) {}
  LazyLibrary(const LazyLibrary&) = delete;
  LazyLibrary& operator=(const LazyLibrary&) = delete;
  // Kept open to the end of the process, as a linked library is: a library's destructors and
  // threads may outlive any point at which closing it would be safe.
  ~LazyLibrary() = default;

  // The function `name` of the library, or nullptr when the library or the function cannot
  // be had (error() then says why, in one line).
  template <typename Function>
  Function* function(const char* name) {
    return reinterpret_cast<Function*>(symbol(name));
  }
  std::string error();

 private:
  void* symbol(const char* name);
  void open();
  void failed(const std::string& why);

  const char* soname_;
  const char* lost_;
  std::once_flag opened_;
  void* handle_ = nullptr;
  std::mutex mutex_;      // lookups come from any thread (table workers, the reader)
  char error_[256] = {};  // not a std::string: a constinit instance needs a constant initializer
  bool said_ = false;
};

}  // namespace bpfprof
