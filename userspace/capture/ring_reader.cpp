#include "userspace/capture/ring_reader.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace bpfprof {
namespace {

// A record's place in the ring: its 8-byte header, then its data, rounded up to 8 bytes.
uint64_t record_span(uint32_t header) {
  const uint64_t length = header & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
  return (length + BPF_RINGBUF_HDR_SZ + 7) / 8 * 8;
}

}  // namespace

int consume_ring(const RingView& ring, RingRecordHandler handler, void* context,
                 std::vector<uint64_t>& scratch) {
  const uint64_t mask = ring.size - 1;
  unsigned long consumer = __atomic_load_n(ring.consumer_pos, __ATOMIC_ACQUIRE);
  int handed = 0;
  for (;;) {
    const unsigned long producer = __atomic_load_n(ring.producer_pos, __ATOMIC_ACQUIRE);
    if (consumer >= producer) return handed;
    while (consumer < producer) {
      const auto* header = reinterpret_cast<const uint32_t*>(ring.data + (consumer & mask));
      const uint32_t length_and_flags = __atomic_load_n(header, __ATOMIC_ACQUIRE);
      if (length_and_flags & BPF_RINGBUF_BUSY_BIT) return handed;  // not committed yet
      const size_t start = (consumer + BPF_RINGBUF_HDR_SZ) & mask;
      if (record_span(length_and_flags) > ring.size) return -EIO;  // no such record fits
      consumer += record_span(length_and_flags);
      if (!(length_and_flags & BPF_RINGBUF_DISCARD_BIT)) {
        const size_t length = length_and_flags & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
        void* record = const_cast<uint8_t*>(ring.data + start);
        if (start + length > ring.size) {  // across the end: one piece in scratch
          scratch.resize((length + 7) / 8);
          const size_t first = ring.size - start;
          std::memcpy(scratch.data(), ring.data + start, first);
          std::memcpy(reinterpret_cast<uint8_t*>(scratch.data()) + first, ring.data,
                      length - first);
          record = scratch.data();
        }
        const int result = handler(context, record, length);
        if (result < 0) {
          __atomic_store_n(ring.consumer_pos, consumer, __ATOMIC_RELEASE);
          return result;
        }
        ++handed;
      }
      __atomic_store_n(ring.consumer_pos, consumer, __ATOMIC_RELEASE);
    }
  }
}

RingReader::RingReader(int map_fd, RingRecordHandler handler, void* context)
    : map_fd_(map_fd),
      handler_(handler),
      context_(context),
      page_size_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
  bpf_map_info info{};
  uint32_t info_size = sizeof(info);
  if (bpf_obj_get_info_by_fd(map_fd, &info, &info_size) != 0)
    throw std::system_error(errno, std::generic_category(), "cannot read a ring buffer's size");
  if (info.type != BPF_MAP_TYPE_RINGBUF || info.max_entries == 0 ||
      (info.max_entries & (info.max_entries - 1)) != 0 || info.max_entries % page_size_ != 0)
    throw std::system_error(EINVAL, std::generic_category(), "not a ring buffer map");
  consumer_page_ = mmap(nullptr, page_size_, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
  if (consumer_page_ == MAP_FAILED) {
    consumer_page_ = nullptr;
    throw std::system_error(errno, std::generic_category(), "cannot map a ring buffer");
  }
  // The producer's page, then the data once.
  producer_and_data_ = mmap(nullptr, page_size_ + info.max_entries, PROT_READ, MAP_SHARED, map_fd,
                            static_cast<off_t>(page_size_));
  if (producer_and_data_ == MAP_FAILED) {
    const int error = errno;
    producer_and_data_ = nullptr;
    munmap(consumer_page_, page_size_);
    throw std::system_error(error, std::generic_category(), "cannot map a ring buffer");
  }
  view_ = RingView{static_cast<unsigned long*>(consumer_page_),
                   static_cast<const unsigned long*>(producer_and_data_),
                   static_cast<const uint8_t*>(producer_and_data_) + page_size_, info.max_entries};
}

RingReader::~RingReader() {
  if (producer_and_data_) munmap(producer_and_data_, page_size_ + view_.size);
  if (consumer_page_) munmap(consumer_page_, page_size_);
}

}  // namespace bpfprof
