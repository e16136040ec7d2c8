#include "runtimes/hotspot/debug_info.h"

#include <algorithm>

namespace bpfprof::hotspot {

namespace {

// CompressedStream (JDK 17): integers in 1-5 bytes (UNSIGNED5); a byte below 192 ends one.
constexpr uint32_t kUnsigned5Low = 192;
constexpr int kUnsigned5MaxBytes = 5;
// CompressedLineNumberWriteStream: an escape byte before two signed integers (bci and line
// deltas) that do not fit the one-byte form (5 bits of bci, 3 of line).
constexpr uint8_t kLineEscape = 0xff;
// A line table's bytes read at most (more than any method's table: 64 KiB of bytecodes).
constexpr size_t kMaxLineTableBytes = 256 << 10;
constexpr uint64_t kPage = 4096;
constexpr uint64_t kFirstLinePiece = 64;
// An nmethod's parts lie within this of its start (HotSpot's code heaps are far smaller
// than this; a larger offset is a misread).
constexpr int64_t kMaxNmethodBytes = 64 << 20;
// DebugInformationRecorder::serialized_null: no scope recorded at the pc.
constexpr uint32_t kSerializedNull = 0;

class ByteStream {
 public:
  explicit ByteStream(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  std::optional<uint8_t> byte() {
    if (at_ >= bytes_.size()) return std::nullopt;
    return bytes_[at_++];
  }
  std::optional<uint32_t> unsigned5() {
    uint64_t sum = 0;
    for (int i = 0; i < kUnsigned5MaxBytes; ++i) {
      const std::optional<uint8_t> b = byte();
      if (!b) return std::nullopt;
      sum += uint64_t{*b} << (6 * i);
      if (*b < kUnsigned5Low || i == kUnsigned5MaxBytes - 1) break;
    }
    return static_cast<uint32_t>(sum);  // HotSpot's int arithmetic wraps the same way
  }
  std::optional<int32_t> signed5() {
    const std::optional<uint32_t> v = unsigned5();
    if (!v) return std::nullopt;
    return static_cast<int32_t>((*v >> 1) ^ (0u - (*v & 1)));
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

// Signals why a read failed: the reader's reason, or `what` alone.
DebugInfoError failed(RemoteReader& reader, const std::string& what) {
  const std::optional<ReadFailure> why = reader.failure();
  return {why ? what + ": " + std::string(read_failure_name(*why)) : what};
}

// A line table's bytes from `address` on, read in growing pieces until they decode: the
// first small (a table may end just before unmapped memory), none past a page's end.
std::optional<LineTable> read_line_table(RemoteReader& reader, uint64_t address) {
  std::vector<uint8_t> bytes;
  uint64_t chunk = kFirstLinePiece;
  while (bytes.size() < kMaxLineTableBytes) {
    const uint64_t at = address + bytes.size();
    const size_t piece =
        std::min<uint64_t>({chunk, kPage - at % kPage, kMaxLineTableBytes - bytes.size()});
    chunk = std::min<uint64_t>(chunk * 2, kPage);
    bytes.resize(bytes.size() + piece);
    if (!reader.read(at, bytes.data() + bytes.size() - piece, piece)) return std::nullopt;
    if (auto table = LineTable::decode(bytes)) return table;
  }
  return std::nullopt;
}

}  // namespace

std::optional<LineTable> LineTable::decode(std::span<const uint8_t> bytes) {
  ByteStream in(bytes);
  LineTable table;
  // HotSpot's int arithmetic: a hostile table's deltas wrap, as they would there.
  uint32_t bci = 0;
  uint32_t line = 0;
  while (table.entries_.size() <= kMaxEntries) {
    const std::optional<uint8_t> next = in.byte();
    if (!next) return std::nullopt;  // no end within the bytes
    if (*next == 0) return table;
    if (*next == kLineEscape) {
      const std::optional<int32_t> bci_delta = in.signed5();
      const std::optional<int32_t> line_delta = in.signed5();
      if (!bci_delta || !line_delta) return std::nullopt;
      bci += static_cast<uint32_t>(*bci_delta);
      line += static_cast<uint32_t>(*line_delta);
    } else {
      bci += *next >> 3;
      line += *next & 7;
    }
    table.entries_.emplace_back(static_cast<int32_t>(bci), static_cast<int32_t>(line));
  }
  return std::nullopt;
}

uint32_t LineTable::line_at(int32_t bci) const {
  int32_t best_bci = 0;
  int32_t best_line = 0;
  for (const auto& [at, line] : entries_) {
    if (at == bci) return line > 0 ? static_cast<uint32_t>(line) : 0;
    if (at < bci && at >= best_bci) {
      best_bci = at;
      best_line = line;
    }
  }
  return best_line > 0 ? static_cast<uint32_t>(best_line) : 0;
}

std::variant<MethodCode, DebugInfoError> read_method_code(RemoteReader& reader,
                                                          const HotSpotLayout& layout,
                                                          uint64_t method) {
  if (!layout.debug_info) return DebugInfoError{"no debug info layout"};
  const DebugInfoLayout& d = *layout.debug_info;
  const std::optional<uint64_t> const_method = reader.word(method + layout.method_const_method);
  if (!const_method || !*const_method) return failed(reader, "Method::_constMethod");
  const auto flags = reader.value<uint16_t>(*const_method + d.const_method_flags);
  const auto code_size = reader.value<uint16_t>(*const_method + d.const_method_code_size);
  if (!flags || !code_size) return failed(reader, "ConstMethod");
  MethodCode code;
  code.code_begin = *const_method + d.const_method_size;
  code.code_size = *code_size;
  if (*flags & d.has_line_table) {
    code.lines = read_line_table(reader, code.code_begin + *code_size);
    if (!code.lines) return failed(reader, "line number table");
  }
  return code;
}

namespace {

// Reads one compiled frame's scopes, each problem ending it with a reason.
class ScopeReader {
 public:
  ScopeReader(RemoteReader& reader, const HotSpotLayout& layout, uint64_t nmethod)
      : r_(reader), l_(layout), d_(*layout.debug_info), nm_(nmethod) {}

  std::variant<std::vector<JavaScope>, DebugInfoError> scopes(uint64_t method, uint64_t pc,
                                                              PcKind kind);

 private:
  std::optional<int64_t> offset(uint32_t field) {
    const std::optional<int32_t> v = r_.value<int32_t>(nm_ + field);
    if (!v || *v <= 0 || *v > kMaxNmethodBytes) return std::nullopt;
    return *v;
  }
  // The scope decode offset of the first PcDesc at or after `pc_offset` (at it: `exact`).
  std::optional<uint32_t> decode_offset(int64_t pc_offset, bool exact);
  std::optional<JavaScope> scope(uint32_t decode_offset, uint32_t& sender);

  RemoteReader& r_;
  const HotSpotLayout& l_;
  const DebugInfoLayout& d_;
  uint64_t nm_;
  uint64_t metadata_ = 0;  // the nmethod's Metadata* table, and its length
  uint64_t metadata_count_ = 0;
  uint64_t scopes_ = 0;  // scopes data, up to the PcDescs
  uint64_t pcs_ = 0;     // PcDescs, up to the dependencies
  uint64_t pcs_end_ = 0;
};

std::optional<uint32_t> ScopeReader::decode_offset(int64_t pc_offset, bool exact) {
  uint64_t low = 0;
  uint64_t high = (pcs_end_ - pcs_) / d_.pc_desc_size;
  while (low < high) {  // HotSpot keeps its PcDescs sorted by pc
    const uint64_t mid = low + (high - low) / 2;
    const auto at = r_.value<int32_t>(pcs_ + mid * d_.pc_desc_size + d_.pc_desc_pc_offset);
    if (!at) return std::nullopt;
    if (*at < pc_offset)
      low = mid + 1;
    else
      high = mid;
  }
  if (low == (pcs_end_ - pcs_) / d_.pc_desc_size) return std::nullopt;
  const auto at = r_.value<int32_t>(pcs_ + low * d_.pc_desc_size + d_.pc_desc_pc_offset);
  if (!at || (exact && *at != pc_offset)) return std::nullopt;
  const auto decode =
      r_.value<int32_t>(pcs_ + low * d_.pc_desc_size + d_.pc_desc_scope_decode_offset);
  if (!decode || *decode < 0 || static_cast<uint64_t>(*decode) >= pcs_ - scopes_)
    return std::nullopt;
  return static_cast<uint32_t>(*decode);
}

// ScopeDesc::decode_body: the sender's decode offset, the method's index in the metadata
// table (from 1), the bytecode index plus one.
std::optional<JavaScope> ScopeReader::scope(uint32_t decode_offset, uint32_t& sender) {
  uint8_t bytes[3 * kUnsigned5MaxBytes];
  const size_t size = std::min<uint64_t>(sizeof(bytes), pcs_ - scopes_ - decode_offset);
  if (!r_.read(scopes_ + decode_offset, bytes, size)) return std::nullopt;
  ByteStream in(std::span<const uint8_t>(bytes, size));
  const std::optional<uint32_t> next = in.unsigned5();
  const std::optional<uint32_t> index = in.unsigned5();
  const std::optional<uint32_t> bci = in.unsigned5();
  if (!next || !index || !bci || *index == 0 || *index > metadata_count_ || *bci > 0xffff)
    return std::nullopt;
  const std::optional<uint64_t> method = r_.word(metadata_ + 8 * (*index - 1));
  if (!method || !*method) return std::nullopt;
  sender = *next;
  return JavaScope{*method, static_cast<int32_t>(*bci) - 1};
}

std::variant<std::vector<JavaScope>, DebugInfoError> ScopeReader::scopes(uint64_t method,
                                                                         uint64_t pc, PcKind kind) {
  const auto own = r_.word(nm_ + l_.compiled_method);
  const auto code_begin = r_.word(nm_ + l_.blob_code_begin);
  const auto code_end = r_.word(nm_ + l_.blob_code_end);
  if (!own || *own != method || !code_begin || !code_end || pc < *code_begin || pc >= *code_end)
    return DebugInfoError{"the nmethod was freed or reused"};
  const auto metadata = offset(d_.nmethod_metadata);
  const auto scopes = r_.word(nm_ + d_.scopes_data_begin);
  const auto pcs = offset(d_.nmethod_scopes_pcs);
  const auto pcs_end = offset(d_.nmethod_dependencies);
  if (!metadata || !scopes || !pcs || !pcs_end || *scopes < nm_ + *metadata ||
      *scopes > nm_ + *pcs || *pcs > *pcs_end)
    return DebugInfoError{"the nmethod's debug info is out of order"};
  metadata_ = nm_ + *metadata;
  metadata_count_ = (*scopes - metadata_) / 8;
  scopes_ = *scopes;
  pcs_ = nm_ + *pcs;
  pcs_end_ = nm_ + *pcs_end;
  std::optional<uint32_t> decode =
      decode_offset(static_cast<int64_t>(pc - *code_begin), kind == PcKind::kReturnAddress);
  if (!decode) return failed(r_, "no PcDesc for the pc");
  std::vector<JavaScope> out;
  for (uint32_t at = *decode; at != kSerializedNull && out.size() < kMaxScopes;) {
    uint32_t sender = kSerializedNull;
    const std::optional<JavaScope> s = scope(at, sender);
    if (!s) return failed(r_, "scope at " + std::to_string(at));
    out.push_back(*s);
    at = sender;
  }
  if (out.empty()) out.push_back({method, -1});  // no scope: the method, at no known bci
  if (out.back().method != method) return DebugInfoError{"the outermost scope is another method"};
  return out;
}

}  // namespace

std::variant<std::vector<JavaScope>, DebugInfoError> read_compiled_scopes(
    RemoteReader& reader, const HotSpotLayout& layout, uint64_t nmethod, uint64_t method,
    uint64_t pc, PcKind kind) {
  if (!layout.debug_info || !layout.debug_info->pc_desc_size)
    return DebugInfoError{"no debug info layout"};
  return ScopeReader(reader, layout, nmethod).scopes(method, pc, kind);
}

}  // namespace bpfprof::hotspot
