#include "symbols/util/lazy_library.h"

#include <dlfcn.h>

namespace bpfprof {

void LazyLibrary::open() {
  std::call_once(opened_, [this] {
    handle_ = dlopen(soname_, RTLD_NOW | RTLD_LOCAL);
    if (!handle_) error_ = std::string("cannot load ") + soname_ + ": " + dlerror();
  });
}

void* LazyLibrary::symbol(const char* name) {
  open();
  if (!handle_) return nullptr;
  void* found = dlsym(handle_, name);
  if (!found) error_ = std::string(soname_) + " has no " + name;
  return found;
}

std::string LazyLibrary::error() {
  open();
  return error_;
}

}  // namespace bpfprof
