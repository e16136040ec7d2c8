// A move-only owner for C handles (file descriptors, libelf Elf*), so every early return
// in the parsing code releases what it opened.
#pragma once

#include <unistd.h>

#include <utility>

namespace bpfprof {

template <typename Handle, typename Closer, Handle kInvalid = Handle{}>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(Handle handle) : handle_(handle) {}
  ~UniqueHandle() { reset(); }

  UniqueHandle(UniqueHandle&& other) noexcept : handle_(other.release()) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;

  Handle get() const { return handle_; }
  bool valid() const { return handle_ != kInvalid; }
  explicit operator bool() const { return valid(); }

  Handle release() { return std::exchange(handle_, kInvalid); }
  void reset(Handle handle = kInvalid) {
    Handle old = std::exchange(handle_, handle);
    if (old != kInvalid) Closer{}(old);
  }

 private:
  Handle handle_ = kInvalid;
};

struct FdCloser {
  void operator()(int fd) const noexcept { ::close(fd); }
};
using UniqueFd = UniqueHandle<int, FdCloser, -1>;

}  // namespace bpfprof
