// Ruby's instruction sequences (runtimes/ruby/iseqs.h) read from a pretend process laid out
// as CRuby 3.1 lays them out: labels embedded and on the heap, a [path, realpath] pathobj,
// lines by position and by the succinct index that replaces positions in long iseqs.
#include "runtimes/ruby/iseqs.h"

#include <gtest/gtest.h>

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
                   kEntries = kBase + 0x2000, kPositions = kBase + 0x2800,
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
    if (!succinct) image.u32(kPositions + 4 * i, positions[i]);
  }
  image.word(kBody + L.body_insns_positions, succinct ? 0 : kPositions);
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
  hotspot::BufferMemory memory;
  memory.place(kBase, image.bytes);
  hotspot::RemoteReader reader(memory, 1 << 20, 0);
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

}  // namespace
}  // namespace bpfprof
