// Ruby's instruction sequences (runtimes/ruby/iseqs.h) read from a pretend process laid out
// as CRuby 3.1 lays them out: labels embedded and on the heap, a [path, realpath] pathobj,
// lines by position and by the succinct index that replaces positions in long iseqs.
#include "runtimes/ruby/iseqs.h"

#include <gtest/gtest.h>

#include "runtimes/ruby/processes.h"

#include <cstring>
#include <string>
#include <vector>

namespace bpfprof {
namespace {

constexpr uint64_t kBase = 0x100000;
const RubyLayout& L = kRuby31;

// A pretend heap: words and bytes placed at offsets from kBase.
struct Image {
  std::string bytes = std::string(0x4000, '\0');
  void word(uint64_t at, uint64_t value) { memcpy(bytes.data() + (at - kBase), &value, 8); }
  void u32(uint64_t at, uint32_t value) { memcpy(bytes.data() + (at - kBase), &value, 4); }
  void text(uint64_t at, const std::string& s) {
    memcpy(bytes.data() + (at - kBase), s.data(), s.size());
  }
  // An RString at `at`: embedded when short, else its bytes at `at` + 0x100.
  void string(uint64_t at, const std::string& s) {
    if (s.size() <= 23) {
      word(at, L.type_string | uint64_t{s.size()} << L.string_embed_length_shift);
      text(at + L.string_embedded, s);
      return;
    }
    word(at, L.type_string | L.string_no_embed);
    word(at + L.string_length, s.size());
    word(at + L.string_pointer, at + 0x100);
    text(at + 0x100, s);
  }
};

constexpr uint64_t kIseq = kBase, kBody = kBase + 0x100, kLabel = kBase + 0x400,
                   kPath = kBase + 0x600, kPathArray = kBase + 0x800, kEncoded = kBase + 0x1000,
                   kEntries = kBase + 0x2000, kPositionsArray = kBase + 0x2800,
                   kSuccinct = kBase + 0x3000;

// An iseq of `instructions` VALUEs whose entries start at `positions` with lines 10, 11, ...
Image make_iseq(const std::string& label, uint32_t instructions,
                const std::vector<uint32_t>& positions, bool succinct) {
  Image image;
  image.word(kIseq, L.type_imemo | uint64_t{L.imemo_iseq} << L.imemo_shift);
  image.word(kIseq + L.iseq_body, kBody);
  image.u32(kBody + L.body_iseq_size, instructions);
  image.word(kBody + L.body_iseq_encoded, kEncoded);
  image.string(kLabel, label);
  image.string(kPath, "/srv/app/work.rb");
  image.word(kPathArray, L.type_array | L.array_embed);
  image.word(kPathArray + L.array_embedded, kPath);
  image.word(kBody + L.body_label, kLabel);
  image.word(kBody + L.body_path, kPathArray);
  image.word(kBody + L.body_first_line, 9 * 2 + 1);  // Fixnum 9
  image.word(kBody + L.body_insns_info, kEntries);
  image.u32(kBody + L.body_insns_info_size, static_cast<uint32_t>(positions.size()));
  for (size_t i = 0; i < positions.size(); ++i) {
    image.u32(kEntries + i * L.insn_info_size, static_cast<uint32_t>(10 + i));
    if (!succinct) image.u32(kPositionsArray + 4 * i, positions[i]);
  }
  image.word(kBody + L.body_insns_positions, succinct ? 0 : kPositionsArray);
  image.word(kBody + L.body_insns_succ_table, succinct ? kSuccinct : 0);
  if (!succinct) return image;
  // The ranks CRuby's succ_index_table_create stores: immediate 7-bit ranks, then one block.
  std::vector<bool> set(instructions);
  for (uint32_t p : positions) set[p] = true;
  uint32_t rank = 0;
  std::vector<uint64_t> imm(6);
  for (uint32_t x = 0; x < std::min(instructions, 54u); ++x) {
    rank += set[x];
    imm[x / 9] |= uint64_t{rank} << (x % 9 * 7);
  }
  for (size_t i = 0; i < 6; ++i) image.word(kSuccinct + 8 * i, imm[i]);
  const uint64_t block = kSuccinct + 48;
  image.u32(block, rank);
  uint64_t small_ranks = 0, bits[8] = {};
  uint32_t in_block = 0;
  for (uint32_t x = 54; x < instructions; ++x) {
    const uint32_t b = x - 54;
    if (b % 64 == 0 && b / 64 > 0) small_ranks |= uint64_t{in_block} << ((b / 64 - 1) * 9);
    if (set[x]) bits[b / 64] |= uint64_t{1} << (b % 64), ++in_block;
  }
  image.word(block + 8, small_ranks);
  for (size_t i = 0; i < 8; ++i) image.word(block + 16 + 8 * i, bits[i]);
  return image;
}

std::optional<RubyIseq> read(const Image& image, RubyIseqLimits limits = {}) {
  BufferMemory memory;
  memory.place(kBase, image.bytes);
  RemoteReader reader(memory, 1 << 20, 0);
  return read_ruby_iseq(reader, L, kIseq, limits);
}

uint64_t pc_after(uint32_t instruction) { return kEncoded + 8 * (instruction + 1); }

TEST(RubyIseqs, NamesAndLinesByPosition) {
  const auto iseq = read(make_iseq("block in work", 20, {0, 4, 9}, false));
  ASSERT_TRUE(iseq);
  EXPECT_EQ(iseq->label, "block in work");
  EXPECT_EQ(iseq->path, "/srv/app/work.rb");
  EXPECT_EQ(iseq->first_line, 9u);
  EXPECT_EQ(iseq->line_at(pc_after(0)), 10u);
  EXPECT_EQ(iseq->line_at(pc_after(3)), 10u);
  EXPECT_EQ(iseq->line_at(pc_after(4)), 11u);
  EXPECT_EQ(iseq->line_at(pc_after(19)), 12u);
  EXPECT_EQ(iseq->line_at(kEncoded - 8), std::nullopt);
}

TEST(RubyIseqs, HeapLabelAndSuccinctLines) {
  const std::string long_label = "a_method_whose_name_is_not_embedded";
  const auto iseq = read(make_iseq(long_label, 300, {0, 30, 60, 200, 299}, true));
  ASSERT_TRUE(iseq);
  EXPECT_EQ(iseq->label, long_label);
  EXPECT_EQ(iseq->line_at(pc_after(29)), 10u);
  EXPECT_EQ(iseq->line_at(pc_after(30)), 11u);
  EXPECT_EQ(iseq->line_at(pc_after(59)), 11u);
  EXPECT_EQ(iseq->line_at(pc_after(60)), 12u);
  EXPECT_EQ(iseq->line_at(pc_after(199)), 12u);
  EXPECT_EQ(iseq->line_at(pc_after(250)), 13u);
  EXPECT_EQ(iseq->line_at(pc_after(299)), 14u);
}

TEST(RubyIseqs, RefusesWhatIsNoIseqOrPastTheLimits) {
  Image not_iseq = make_iseq("x", 4, {0}, false);
  not_iseq.word(kIseq, L.type_string);
  EXPECT_FALSE(read(not_iseq));
  EXPECT_FALSE(read(make_iseq("a_label_longer_than_the_limit", 4, {0}, false), {.max_text = 8}));
  EXPECT_FALSE(read(make_iseq("x", 5000, {0}, false), {.max_instructions = 4096}));
  // A line table past its limit leaves the name, without lines.
  const auto unlined = read(make_iseq("x", 20, {0, 4, 9}, false), {.max_line_entries = 2});
  ASSERT_TRUE(unlined);
  EXPECT_EQ(unlined->line_at(pc_after(5)), std::nullopt);
}

// A C method's entry whose original_id is a dynamic ID of serial 600: its name is entry
// 600 % 512 of the second unit of ruby_global_symbols.ids.
TEST(RubyMethodNames, NamesACMethodThroughTheSymbolTable) {
  constexpr uint64_t kEntry = kBase, kDefinition = kBase + 0x100, kSymbols = kBase + 0x200,
                     kIds = kBase + 0x300, kUnits = kBase + 0x400, kUnit = kBase + 0x500,
                     kName = kBase + 0x600, kNames = kBase + 0x1000;
  Image image;
  image.word(kEntry, L.type_imemo | uint64_t{L.imemo_ment} << L.imemo_shift);
  image.word(kEntry + L.method_entry_def, kDefinition);
  image.word(kDefinition + L.definition_original_id, uint64_t{600} << L.id_scope_shift | 1);
  image.u32(kSymbols + L.symbols_last_id, 700);
  image.word(kSymbols + L.symbols_ids, kIds);
  image.word(kIds, L.type_array);  // on the heap: [unit 0, unit 1]
  image.word(kIds + L.array_length, 2);
  image.word(kIds + L.array_pointer, kUnits);
  image.word(kUnits + 8, kUnit);
  image.word(kUnit, L.type_array);
  image.word(kUnit + L.array_length, 2 * L.id_entry_unit);
  image.word(kUnit + L.array_pointer, kNames);
  image.word(kNames + 8 * (600 % L.id_entry_unit * L.id_entry_size), kName);
  image.string(kName, "times");
  auto name = [&](const Image& with, uint64_t symbols) {
    BufferMemory memory;
    memory.place(kBase, with.bytes);
    RemoteReader reader(memory, 1 << 20, 0);
    return read_ruby_method_name(reader, L, kEntry, symbols);
  };
  EXPECT_EQ(name(image, kSymbols), "times");
  EXPECT_EQ(name(image, 0), std::nullopt);  // the table was not found
  Image past_last = image;
  past_last.u32(kSymbols + L.symbols_last_id, 599);
  EXPECT_EQ(name(past_last, kSymbols), std::nullopt);
  Image short_unit = image;
  short_unit.word(kUnit + L.array_length, 100);
  EXPECT_EQ(name(short_unit, kSymbols), std::nullopt);
  Image not_entry = image;
  not_entry.word(kEntry, L.type_imemo | uint64_t{L.imemo_iseq} << L.imemo_shift);
  EXPECT_EQ(name(not_entry, kSymbols), std::nullopt);
}

// Debian's libruby 3.1.2: rb_id2str at 0x208e80 jumps to the reader of ruby_global_symbols,
// which compares the serial with last_id (0x3af1c0) and loads ids (0x3af1d0).
TEST(RubyMethodNames, FindsTheGlobalSymbolsFromRbId2str) {
  const std::vector<uint8_t> id2str = {0x48, 0x89, 0xf8, 0x48, 0xc1, 0xe8, 0x04, 0x48,
                                       0x81, 0xff, 0xa9, 0x00, 0x00, 0x00, 0x0f, 0x47,
                                       0xf8, 0x31, 0xf6, 0xe9, 0x78, 0xdd, 0xff, 0xff};
  const std::vector<uint8_t> reader = {
      0x41, 0x55, 0x41, 0x89, 0xf5, 0x41, 0x54, 0x55, 0x53, 0x89, 0xfb, 0x48, 0x83,
      0xec, 0x18, 0x48, 0x8b, 0x2d, 0xca, 0x79, 0x1a, 0x00, 0x64, 0x48, 0x8b, 0x04,
      0x25, 0x28, 0x00, 0x00, 0x00, 0x48, 0x89, 0x44, 0x24, 0x08, 0x31, 0xc0, 0x4c,
      0x8b, 0x65, 0x00, 0x4d, 0x85, 0xe4, 0x0f, 0x84, 0x9d, 0x00, 0x00, 0x00, 0x31,
      0xed, 0x85, 0xff, 0x74, 0x67, 0x39, 0x3d, 0x71, 0x85, 0x1a, 0x00, 0x72, 0x5f,
      0x48, 0x8b, 0x3d, 0x78, 0x85, 0x1a, 0x00, 0x89, 0xde, 0xc1, 0xee, 0x09};
  auto code = [&](uint64_t vaddr, size_t size) {
    const std::vector<uint8_t>& from = vaddr == 0x208e80 ? id2str : reader;
    if (vaddr != 0x208e80 && vaddr != 0x206c10) return std::vector<uint8_t>{};
    return std::vector<uint8_t>(from.begin(), from.begin() + std::min(size, from.size()));
  };
  EXPECT_EQ(find_ruby_global_symbols(code, 0x208e80, L), 0x3af1c0u);
  // Without the load of ids 16 bytes past last_id, nothing.
  std::vector<uint8_t> other = reader;
  other[other.size() - 7] = 0x79;
  auto other_code = [&](uint64_t vaddr, size_t size) {
    return vaddr == 0x208e80
               ? code(vaddr, size)
               : std::vector<uint8_t>(other.begin(), other.begin() + std::min(size, other.size()));
  };
  EXPECT_EQ(find_ruby_global_symbols(other_code, 0x208e80, L), std::nullopt);
}

}  // namespace
}  // namespace bpfprof
