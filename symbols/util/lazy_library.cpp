#include "symbols/util/lazy_library.h"

#include <dlfcn.h>

#include <cstdio>

namespace bpfprof {

void LazyLibrary::open() {
  std::call_once(opened_, [this] {
    handle_ = dlopen(soname_, RTLD_NOW | RTLD_LOCAL);
    if (!handle_) failed(std::string("cannot load ") + soname_ + ": " + dlerror());
  });
}

void LazyLibrary::failed(const std::string& why) {
  std::lock_guard lock(mutex_);
  snprintf(error_, sizeof error_, "%s", why.c_str());
  if (lost_ && !said_) fprintf(stderr, "bpfprof: %s: %s\n", error_, lost_);
  said_ = true;
}

void* LazyLibrary::symbol(const char* name) {
  open();
  if (!handle_) return nullptr;
  void* found = dlsym(handle_, name);
  if (!found) failed(std::string(soname_) + " has no " + name);
  return found;
}

std::string LazyLibrary::error() {
  open();
  std::lock_guard lock(mutex_);
  return error_;
}

}  // namespace bpfprof
