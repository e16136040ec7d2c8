// The ring buffer's reading over plain memory laid out as the kernel writes it: records in
// order, discarded ones skipped, a busy one where the reading stops, one across the end in one
// piece, and a handler that stops the reading.
#include "userspace/capture/ring_reader.h"

#include <gtest/gtest.h>
#include <linux/bpf.h>

#include <cstring>
#include <string>
#include <vector>

namespace bpfprof {
namespace {

class FakeRing {
 public:
  explicit FakeRing(size_t size) : data_(size / 8) {}

  // A record of `text` at the producer's position (flags: busy, discard).
  void produce(const std::string& text, uint32_t flags = 0) {
    const size_t mask = size() - 1;
    const uint32_t header[2] = {static_cast<uint32_t>(text.size()) | flags, 0};
    std::memcpy(bytes() + (producer_ & mask), header, sizeof header);
    for (size_t i = 0; i < text.size(); ++i)
      bytes()[(producer_ + BPF_RINGBUF_HDR_SZ + i) & mask] = static_cast<uint8_t>(text[i]);
    producer_ += (text.size() + BPF_RINGBUF_HDR_SZ + 7) / 8 * 8;
  }
  void commit_at(unsigned long position) {
    uint32_t header;
    std::memcpy(&header, bytes() + (position & (size() - 1)), 4);
    header &= ~BPF_RINGBUF_BUSY_BIT;
    std::memcpy(bytes() + (position & (size() - 1)), &header, 4);
  }
  RingView view() { return {&consumer_, &producer_, bytes(), size()}; }
  unsigned long consumer() const { return consumer_; }
  unsigned long producer() const { return producer_; }
  void start_at(unsigned long position) { consumer_ = producer_ = position; }

 private:
  size_t size() const { return data_.size() * 8; }
  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(data_.data()); }
  std::vector<uint64_t> data_;
  unsigned long consumer_ = 0;
  unsigned long producer_ = 0;
};

struct Seen {
  std::vector<std::string> records;
  int stop_after = -1;
};

int collect(void* context, void* data, size_t size) {
  auto* seen = static_cast<Seen*>(context);
  seen->records.emplace_back(static_cast<const char*>(data), size);
  return static_cast<int>(seen->records.size()) == seen->stop_after ? -11 : 0;
}

TEST(RingReader, ReadsCommittedRecordsInOrderAndSkipsDiscardedOnes) {
  FakeRing ring(4096);
  ring.produce("first");
  ring.produce("dropped", BPF_RINGBUF_DISCARD_BIT);
  ring.produce("third record");
  Seen seen;
  std::vector<uint64_t> scratch;
  EXPECT_EQ(consume_ring(ring.view(), collect, &seen, scratch), 2);
  EXPECT_EQ(seen.records, (std::vector<std::string>{"first", "third record"}));
  EXPECT_EQ(ring.consumer(), ring.producer());
  EXPECT_EQ(consume_ring(ring.view(), collect, &seen, scratch), 0);
}

TEST(RingReader, StopsAtABusyRecordAndReadsItOnceCommitted) {
  FakeRing ring(4096);
  ring.produce("done");
  const unsigned long busy_at = ring.producer();
  ring.produce("being written", BPF_RINGBUF_BUSY_BIT);
  ring.produce("after it");
  Seen seen;
  std::vector<uint64_t> scratch;
  EXPECT_EQ(consume_ring(ring.view(), collect, &seen, scratch), 1);
  EXPECT_EQ(ring.consumer(), busy_at);
  ring.commit_at(busy_at);
  EXPECT_EQ(consume_ring(ring.view(), collect, &seen, scratch), 2);
  EXPECT_EQ(seen.records, (std::vector<std::string>{"done", "being written", "after it"}));
}

TEST(RingReader, ARecordAcrossTheEndComesInOnePiece) {
  FakeRing ring(256);
  ring.start_at(256 * 3 + 232);  // positions grow past the size; the header fits at the end
  const std::string across(60, 'x');
  ring.produce(across + "end");
  ring.produce("next");
  Seen seen;
  std::vector<uint64_t> scratch;
  EXPECT_EQ(consume_ring(ring.view(), collect, &seen, scratch), 2);
  EXPECT_EQ(seen.records, (std::vector<std::string>{across + "end", "next"}));
}

TEST(RingReader, AHandlerThatStopsLeavesTheRestForTheNextRead) {
  FakeRing ring(4096);
  for (const char* text : {"a", "b", "c"}) ring.produce(text);
  Seen seen;
  seen.stop_after = 2;
  std::vector<uint64_t> scratch;
  EXPECT_EQ(consume_ring(ring.view(), collect, &seen, scratch), -11);
  seen.stop_after = -1;
  EXPECT_EQ(consume_ring(ring.view(), collect, &seen, scratch), 1);
  EXPECT_EQ(seen.records, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(RingReader, ARecordLongerThanTheRingEndsTheReading) {
  FakeRing ring(256);
  const uint32_t header[2] = {4096, 0};
  RingView view = ring.view();
  std::memcpy(const_cast<uint8_t*>(view.data), header, sizeof header);
  unsigned long producer = 4104;
  view.producer_pos = &producer;
  Seen seen;
  std::vector<uint64_t> scratch;
  EXPECT_LT(consume_ring(view, collect, &seen, scratch), 0);
  EXPECT_TRUE(seen.records.empty());
}

}  // namespace
}  // namespace bpfprof
