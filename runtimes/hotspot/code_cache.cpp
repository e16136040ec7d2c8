#include "runtimes/hotspot/code_cache.h"

#include <algorithm>
#include <array>
#include <optional>

namespace bpfprof::hotspot {

namespace {

// HotSpot reserves at most 2 GiB of code cache; a larger range is misread.
constexpr uint64_t kMaxCodeCacheBytes = uint64_t{2} << 30;
// Segments of 16 bytes to 64 KiB (CodeCacheSegmentSize is 64 or 128).
constexpr int32_t kMinLog2Segment = 4;
constexpr int32_t kMaxLog2Segment = 16;

CodeCacheError not_ready(std::string what) { return {std::move(what) + " not set up yet", true}; }
CodeCacheError bad(std::string what) { return {std::move(what), false}; }

struct Heap {
  uint64_t low = 0;
  uint64_t segmap = 0;
  int32_t log2_segment = 0;
};

// The heaps in CodeCache::_heaps (a GrowableArray<CodeHeap*>*).
std::variant<std::vector<Heap>, CodeCacheError> read_heaps(RemoteReader& r,
                                                           const HotSpotLayout& l) {
  const std::optional<uint64_t> array = r.word(l.code_cache_heaps);
  if (!array) return bad("CodeCache::_heaps unreadable");
  if (!*array) return not_ready("the code heaps");
  const auto length = r.value<int32_t>(*array + l.growable_array_length);
  const std::optional<uint64_t> data = r.word(*array + l.growable_array_data);
  if (!length || !data) return bad("the code heaps' array unreadable");
  if (*length <= 0 || !*data) return not_ready("the code heaps");
  if (*length > BPFPROF_HOTSPOT_CODE_HEAPS) return bad("more code heaps than the walk knows");
  std::vector<Heap> heaps;
  for (int32_t i = 0; i < *length; ++i) {
    const std::optional<uint64_t> heap = r.word(*data + uint64_t(i) * 8);
    if (!heap || !*heap) return bad("a code heap pointer unreadable");
    const std::optional<uint64_t> low = r.word(*heap + l.code_heap_memory + l.virtual_space_low);
    const std::optional<uint64_t> segmap =
        r.word(*heap + l.code_heap_segment_map + l.virtual_space_low);
    const auto log2 = r.value<int32_t>(*heap + l.code_heap_log2_segment_size);
    if (!low || !segmap || !log2) return bad("a code heap unreadable");
    if (*log2 < kMinLog2Segment || *log2 > kMaxLog2Segment)
      return bad("a code heap's segment size 2^" + std::to_string(*log2));
    heaps.push_back({*low, *segmap, *log2});
  }
  std::sort(heaps.begin(), heaps.end(), [](const Heap& a, const Heap& b) { return a.low < b.low; });
  return heaps;
}

// Every offset the walk reads of a blob's header must lie inside the bytes it reads of it.
bool fits_blob_window(const HotSpotLayout& l) {
  const std::array<uint32_t, 6> offsets{l.blob_name,       l.blob_frame_size, l.blob_frame_complete,
                                        l.blob_code_begin, l.blob_code_end,   l.compiled_method};
  return std::all_of(offsets.begin(), offsets.end(),
                     [](uint32_t o) { return o <= BPFPROF_HOTSPOT_BLOB_WINDOW - 8; });
}

void set_frame_slots(const HotSpotLayout& l, bpfprof_hotspot_process& p) {
  p.interpreter_sender_sp = l.interpreter_frame_sender_sp.value_or(kX86InterpreterSenderSp) * 8;
  p.interpreter_method = l.interpreter_frame_method.value_or(kX86InterpreterMethod) * 8;
  p.interpreter_bcp = l.interpreter_frame_bcp.value_or(kX86InterpreterBcp) * 8;
}

}  // namespace

std::variant<bpfprof_hotspot_process, CodeCacheError> read_code_cache(RemoteReader& r,
                                                                      const HotSpotLayout& l) {
  if (!fits_blob_window(l)) return bad("a code blob field beyond the walk's window");
  const std::optional<uint64_t> low = r.word(l.code_cache_low_bound);
  const std::optional<uint64_t> high = r.word(l.code_cache_high_bound);
  if (!low || !high) return bad("the code cache's bounds unreadable");
  if (!*low || !*high) return not_ready("the code cache");
  if (*high <= *low || *high - *low > kMaxCodeCacheBytes) return bad("the code cache's bounds");
  // The interpreter is generated after every code heap is added: once it is there, so are they.
  bpfprof_hotspot_process p{};
  const std::optional<uint64_t> queue = r.word(l.interpreter_code);
  if (!queue) return bad("the interpreter's code unreadable");
  if (!*queue) return not_ready("the interpreter");
  const std::optional<uint64_t> buffer = r.word(*queue + l.stub_queue_buffer);
  const auto limit = r.value<int32_t>(*queue + l.stub_queue_limit);
  if (!buffer || !limit) return bad("the interpreter's stub queue unreadable");
  if (*buffer < *low || *limit <= 0 || *buffer + uint64_t(*limit) > *high)
    return bad("the interpreter's code outside the code cache");
  p.interpreter_low = *buffer;
  p.interpreter_high = *buffer + uint64_t(*limit);
  auto heaps = read_heaps(r, l);
  if (auto* error = std::get_if<CodeCacheError>(&heaps)) return *error;
  const auto& list = std::get<std::vector<Heap>>(heaps);
  p.code_low = *low;
  p.code_high = *high;
  for (size_t i = 0; i < list.size(); ++i) {
    const uint64_t end = i + 1 < list.size() ? list[i + 1].low : *high;
    if (list[i].low < *low || end > *high || list[i].low >= end)
      return bad("a code heap outside the code cache");
    if (list[i].log2_segment != list[0].log2_segment) return bad("code heaps' segment sizes");
    p.heaps[i] = {list[i].low, end, list[i].segmap};
  }
  p.heap_count = static_cast<__u32>(list.size());
  p.log2_segment_size = static_cast<__u32>(list[0].log2_segment);
  p.heap_block_size = l.heap_block_size;
  p.heap_block_used = l.heap_block_used;
  p.blob_name = l.blob_name;
  p.blob_frame_size = l.blob_frame_size;
  p.blob_frame_complete = l.blob_frame_complete;
  p.blob_code_begin = l.blob_code_begin;
  p.blob_code_end = l.blob_code_end;
  p.compiled_method = l.compiled_method;
  set_frame_slots(l, p);
  return p;
}

}  // namespace bpfprof::hotspot
