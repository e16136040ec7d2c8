// Lines and inlined methods of Java frames (runtimes/hotspot/debug_info.h) from a pretend
// nmethod laid out as JDK 17 lays one out: two methods, B inlined into A, each with a line
// table; and hostile variants that must give an error, not a wrong answer. The same image
// seeds fuzz_hotspot_debug_info (tests/fuzz/corpus/hotspot_debug_info).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "runtimes/hotspot/debug_info.h"
#include "runtimes/kit/remote_memory.h"
#include "tests/unit/hotspot_fake_nmethod.h"

namespace bpfprof::hotspot {
namespace {

constexpr uint64_t kBase = fake::kNmethodAt;
constexpr uint64_t kMethodA = kBase + 0x300;  // the nmethod's own
constexpr uint64_t kMethodB = kBase + 0x340;  // inlined into A
constexpr uint64_t kCodeBegin = kBase + 0x200;

HotSpotLayout layout() { return fake::jdk17_debug_info_layout(); }

class Image {
 public:
  Image() : bytes_(0x500, '\0') {
    word(32, kCodeBegin);
    word(40, kCodeBegin + 0x40);
    word(112, kMethodA);
    word(120, kBase + 0x140);  // scopes data
    i32(260, 0x130);           // Metadata*: A, B
    i32(268, 0x160);           // PcDescs
    i32(272, 0x1a0);
    word(0x130, kMethodA);
    word(0x138, kMethodB);
    // Scopes: 0 is "none"; at 1 A at bci 4 (no sender); at 4 B at bci 2, sent from 1.
    put(0x140, {0, 0, 1, 5, 1, 2, 3, 0});
    const int32_t pcs[4][2] = {{-1, 0}, {0x10, 4}, {0x20, 1}, {0x7fffffff, 0}};
    for (int k = 0; k < 4; ++k) {
      i32(0x160 + 16 * k, pcs[k][0]);
      i32(0x164 + 16 * k, pcs[k][1]);
    }
    // A: 8 bytes of code, lines (bci 0, line 10) escaped, (4, 12) in one byte.
    word(0x308, kBase + 0x400);
    u16(0x400 + 28, 1);
    u16(0x400 + 32, 8);
    put(0x438, {0xff, 0, 20, 0x22, 0});
    // B: 4 bytes of code, (0, 30).
    word(0x348, kBase + 0x480);
    u16(0x480 + 28, 1);
    u16(0x480 + 32, 4);
    put(0x4b4, {0xff, 0, 60, 0});
  }
  void word(size_t at, uint64_t v) { memcpy(&bytes_[at], &v, 8); }
  void i32(size_t at, int32_t v) { memcpy(&bytes_[at], &v, 4); }
  void u16(size_t at, uint16_t v) { memcpy(&bytes_[at], &v, 2); }
  void put(size_t at, std::vector<uint8_t> v) { memcpy(&bytes_[at], v.data(), v.size()); }

  std::variant<std::vector<JavaScope>, DebugInfoError> scopes(uint64_t pc,
                                                              uint64_t method = kMethodA,
                                                              PcKind kind = PcKind::kLeaf) {
    BufferMemory memory;
    memory.place(kBase, bytes_);
    RemoteReader reader(memory, kDebugInfoReadBudget, 256);
    return read_compiled_scopes(reader, layout(), kBase, method, pc, kind);
  }
  uint32_t line(uint64_t method, int32_t bci) {
    BufferMemory memory;
    memory.place(kBase, bytes_);
    RemoteReader reader(memory, kDebugInfoReadBudget, 256);
    const auto code = read_method_code(reader, layout(), method);
    const auto* c = std::get_if<MethodCode>(&code);
    return c && c->lines ? c->lines->line_at(bci) : 0;
  }

 private:
  std::string bytes_;
};

std::string error_of(const std::variant<std::vector<JavaScope>, DebugInfoError>& v) {
  const auto* e = std::get_if<DebugInfoError>(&v);
  return e ? e->reason : "";
}

TEST(HotSpotDebugInfo, InlinedMethodComesBeforeTheNmethodsOwn) {
  Image image;
  const auto scopes = image.scopes(kCodeBegin + 0x8);  // the PcDesc at 0x10 covers it
  ASSERT_TRUE(std::holds_alternative<std::vector<JavaScope>>(scopes)) << error_of(scopes);
  const auto& s = std::get<std::vector<JavaScope>>(scopes);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].method, kMethodB);
  EXPECT_EQ(s[0].bci, 2);
  EXPECT_EQ(s[1].method, kMethodA);
  EXPECT_EQ(s[1].bci, 4);
  EXPECT_EQ(image.line(kMethodB, 2), 30u);
  EXPECT_EQ(image.line(kMethodA, 4), 12u);
  EXPECT_EQ(image.line(kMethodA, 3), 10u);  // the closest entry before it
}

TEST(HotSpotDebugInfo, AReturnAddressMatchesItsPcDescExactly) {
  Image image;
  // A call into a stub records no PcDesc: its return address has no scopes of its own.
  EXPECT_NE(error_of(image.scopes(kCodeBegin + 0x18, kMethodA, PcKind::kReturnAddress)), "");
  const auto scopes = image.scopes(kCodeBegin + 0x20, kMethodA, PcKind::kReturnAddress);
  ASSERT_TRUE(std::holds_alternative<std::vector<JavaScope>>(scopes)) << error_of(scopes);
  const auto& s = std::get<std::vector<JavaScope>>(scopes);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].method, kMethodA);
}

TEST(HotSpotDebugInfo, FreedOrReusedNmethodIsRefused) {
  Image image;
  EXPECT_NE(error_of(image.scopes(kCodeBegin + 0x8, kMethodB)), "");  // another method now
  EXPECT_NE(error_of(image.scopes(kCodeBegin + 0x40)), "");           // pc past its code
}

TEST(HotSpotDebugInfo, HostileDebugInfoGivesErrors) {
  Image out_of_order;
  out_of_order.i32(268, 0x120);  // PcDescs before the scopes
  EXPECT_NE(error_of(out_of_order.scopes(kCodeBegin + 0x8)), "");
  Image bad_index;
  bad_index.put(0x145, {7});  // B's scope names metadata slot 7 of 2
  EXPECT_NE(error_of(bad_index.scopes(kCodeBegin + 0x8)), "");
  Image loop;
  loop.put(0x144, {4});  // B's scope is its own sender: ends at kMaxScopes, then refused
  EXPECT_NE(error_of(loop.scopes(kCodeBegin + 0x8)), "");
  Image far;
  far.i32(0x174, 0x4000);  // a decode offset past the scopes
  EXPECT_NE(error_of(far.scopes(kCodeBegin + 0x8)), "");
}

TEST(HotSpotDebugInfo, LineTablesDecodeOrAreRefused) {
  const uint8_t table[] = {0xff, 0, 20, 0x22, 0x09, 0};  // (0,10) (4,12) (5,13)
  const auto lines = LineTable::decode(table);
  ASSERT_TRUE(lines);
  EXPECT_EQ(lines->size(), 3u);
  EXPECT_EQ(lines->line_at(5), 13u);
  EXPECT_EQ(lines->line_at(100), 13u);
  const uint8_t unterminated[] = {0x22, 0x22};
  EXPECT_FALSE(LineTable::decode(unterminated));
  const uint8_t cut_escape[] = {0xff, 0xc0};
  EXPECT_FALSE(LineTable::decode(cut_escape));
  std::vector<uint8_t> endless(LineTable::kMaxEntries + 10, 0x08);
  endless.push_back(0);
  EXPECT_FALSE(LineTable::decode(endless));
}

}  // namespace
}  // namespace bpfprof::hotspot
