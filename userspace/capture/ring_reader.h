// A BPF ring buffer read with its data pages mapped once. libbpf's reader maps them twice, one
// after the other, so that a record across the end reads in one piece; every mapped page of a
// ring counts in the reader's resident memory, which made a 4 MB ring 8 MB of the recorder's.
// Here a record across the end is copied into one piece before it is handed on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bpfprof {

// Called for each record, as libbpf's ring_buffer_sample_fn: a negative return stops the
// reading after that record (which counts as read).
using RingRecordHandler = int (*)(void* context, void* data, size_t size);

// The ring as mapped: the consumer's position (written here), the producer's, and the data
// (`size` bytes, a power of two).
struct RingView {
  unsigned long* consumer_pos;
  const unsigned long* producer_pos;
  const uint8_t* data;
  size_t size;
};

// Reads the records committed since the consumer position, advancing it past each (discarded
// ones skipped, a busy one ends the read). The records handed on, or the handler's negative
// return. `scratch` holds a record that wraps around the end.
int consume_ring(const RingView& ring, RingRecordHandler handler, void* context,
                 std::vector<uint64_t>& scratch);

class RingReader {
 public:
  // The ring of the BPF map `map_fd` (kept open by its owner), mapped. Throws
  // std::system_error.
  RingReader(int map_fd, RingRecordHandler handler, void* context);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Readable (poll) when the producer woke the reader.
  int fd() const { return map_fd_; }
  int consume() { return consume_ring(view_, handler_, context_, scratch_); }

 private:
  int map_fd_;
  RingRecordHandler handler_;
  void* context_;
  size_t page_size_;
  void* consumer_page_ = nullptr;
  void* producer_and_data_ = nullptr;
  RingView view_{};
  std::vector<uint64_t> scratch_;
};

}  // namespace bpfprof
