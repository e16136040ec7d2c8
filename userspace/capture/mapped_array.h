// An array map written from userspace through a shared mapping of its memory.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <bpf/libbpf.h>

namespace bpfprof {

// An mmapable BPF array, written through a shared mapping of it: a file's pages or rows in
// one copy instead of one syscall each. `element` bytes a slot, one after the other (the row
// array's blocks hold rows without a gap between them).
class MappedArray {
 public:
  MappedArray(bpf_map* map, size_t element)
      : MappedArray(bpf_map__fd(map), bpf_map__name(map), bpf_map__value_size(map),
                    bpf_map__max_entries(map), element) {}
  // The array map `fd` of `entries` values of `value_size` bytes.
  MappedArray(int fd, const char* name, size_t value_size, size_t entries, size_t element)
      : element_(element) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t value = (value_size + 7) & ~size_t{7};
    capacity_ = entries * value / element;
    bytes_ = (entries * value + page - 1) / page * page;
    void* base = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
      throw std::system_error(errno, std::generic_category(), std::string("cannot map ") + name);
    base_ = static_cast<uint8_t*>(base);
  }
  ~MappedArray() { munmap(base_, bytes_); }
  MappedArray(const MappedArray&) = delete;
  MappedArray& operator=(const MappedArray&) = delete;

  // `count` values from `values` at slot `first`.
  template <typename T>
  void write(uint32_t first, const T* values, size_t count) {
    if (sizeof(T) != element_ || first + count > capacity_)
      throw std::out_of_range("a write past a BPF array's end");
    memcpy(base_ + size_t{first} * element_, values, count * sizeof(T));
  }
  template <typename T>
  void write(uint32_t first, const std::vector<T>& values) {
    write(first, values.data(), values.size());
  }
  uint32_t capacity() const { return static_cast<uint32_t>(capacity_); }
  size_t bytes() const { return bytes_; }

 private:
  size_t element_;
  size_t capacity_ = 0;
  size_t bytes_ = 0;
  uint8_t* base_ = nullptr;
};

}  // namespace bpfprof
