// HotSpot's tables read from fake images (tests/unit/hotspot_fake_image.h), hostile ones
// among them, where every failure must be an error value; and Java's strings.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <variant>

#include "runtimes/hotspot/layout.h"
#include "runtimes/hotspot/names.h"
#include "runtimes/hotspot/thread_names.h"
#include "runtimes/hotspot/vm_structs.h"
#include "tests/unit/hotspot_fake_image.h"
#include "tests/unit/hotspot_results.h"

namespace bpfprof::hotspot {
namespace {

TEST(JavaStrings, Latin1AndUtf16BecomeUtf8) {
  EXPECT_EQ(java_string_utf8({'a', 0xe9}, false), "a\xc3\xa9");
  EXPECT_EQ(java_string_utf8({'a', 0, 0xe5, 0x65}, true), "a\xe6\x97\xa5");
  // A surrogate pair, and a lone surrogate (U+FFFD).
  EXPECT_EQ(java_string_utf8({0x3d, 0xd8, 0x00, 0xde}, true), "\xf0\x9f\x98\x80");
  EXPECT_EQ(java_string_utf8({0x3d, 0xd8}, true), "\xef\xbf\xbd");
}

VmStructsResult parse(const std::string& input, const VmStructsLimits& limits = {}) {
  BufferMemory memory;
  fake::load(input, memory);
  RemoteReader reader(memory, limits.max_bytes, limits.max_string_bytes);
  return read_vm_structs(reader, fake::symbol_addresses(), limits);
}

VmStructsFailure failure_of(const VmStructsResult& result) {
  EXPECT_TRUE(std::holds_alternative<VmStructsError>(result));
  if (const auto* error = std::get_if<VmStructsError>(&result)) return error->failure;
  return VmStructsFailure::kNoJvm;
}

// A fake image with JDK 17's tables, the layout's entries and one Method.
struct Jdk17Image {
  fake::Image image;
  fake::FakeMethod method;
  Jdk17Image() {
    fake::jdk17_tables(image);
    method = fake::jdk17_method(image);
  }
  // The image's tables with the symbol `symbol` set to `value` after they are laid out.
  std::string input_with(VmSymbol symbol, uint64_t value) {
    image.input();
    image.set_symbol(symbol, value);
    return image.input();
  }
};

TEST(HotSpotFakeImage, ReadsTablesLayoutAndName) {
  Jdk17Image fake;
  const std::string input = fake.image.input();
  const VmStructsResult result = parse(input);
  const VmStructs& vm = value_of(result);
  EXPECT_EQ(vm.field_count(), std::size(fake::kJdk17Fields) + std::size(fake::kJdk17Statics));
  EXPECT_EQ(vm.offset_of("CodeBlob", "_frame_size"), 28u);
  EXPECT_FALSE(vm.offset_of("CodeCache", "_heaps"));  // static: an address, no offset
  EXPECT_TRUE(vm.address_of("CodeCache", "_heaps"));
  EXPECT_EQ(vm.size_of("ConstantPool"), 72u);
  EXPECT_EQ(vm.int_constant("frame::interpreter_frame_last_sp_offset"), -2);
  EXPECT_EQ(vm.long_constant("markWord::hash_bits"), 31u);
  const auto layout = hotspot_layout(vm);
  ASSERT_TRUE(std::holds_alternative<HotSpotLayout>(layout));
  const HotSpotLayout& l = std::get<HotSpotLayout>(layout);
  // Not in the image: two interpreter slots, and what lines and inlined methods need.
  ASSERT_GE(l.absent.size(), 2u);
  EXPECT_EQ(l.absent[0], "frame::interpreter_frame_method_offset");
  EXPECT_EQ(l.absent[1], "frame::interpreter_frame_bcp_offset");
  EXPECT_FALSE(l.debug_info);
  BufferMemory memory;
  fake::load(input, memory);
  RemoteReader reader(memory, 1 << 20, 256);
  const auto name = read_method_name(reader, l, fake.method.method);
  ASSERT_TRUE(std::holds_alternative<JavaMethodName>(name))
      << std::get<MethodNameError>(name).reason;
  EXPECT_EQ(std::get<JavaMethodName>(name).qualified(), "fixture.HotLoop.spin");
  EXPECT_EQ(std::get<JavaMethodName>(name).signature, "(JI)J");
}

TEST(HotSpotFakeImage, HostileTablesGiveErrors) {
  using S = VmSymbol;
  EXPECT_EQ(failure_of(parse("")), VmStructsFailure::kUnreadable);
  EXPECT_EQ(failure_of(parse(Jdk17Image().input_with(S::kStructStride, 1 << 20))),
            VmStructsFailure::kBadEntryLayout);
  // libjvm mapped, its initializers not run yet: read again later, not given up on.
  EXPECT_EQ(failure_of(parse(Jdk17Image().input_with(S::kStructStride, 0))),
            VmStructsFailure::kUnreadable);
  EXPECT_EQ(failure_of(parse(Jdk17Image().input_with(S::kStructOffset, 44))),
            VmStructsFailure::kBadEntryLayout);
  EXPECT_EQ(failure_of(parse(Jdk17Image().input_with(S::kTypes, 0))),
            VmStructsFailure::kUnreadable);
  EXPECT_EQ(failure_of(parse(Jdk17Image().input_with(S::kIntConstants, 0xdead0000))),
            VmStructsFailure::kUnreadable);
  VmStructsLimits few;
  few.max_entries = 10;
  EXPECT_EQ(failure_of(parse(Jdk17Image().image.input(), few)), VmStructsFailure::kTooMany);
  VmStructsLimits small;
  small.max_bytes = 2000;
  EXPECT_EQ(failure_of(parse(Jdk17Image().image.input(), small)), VmStructsFailure::kBudgetUsed);
  // A name longer than the bound, and one with a byte no name has.
  Jdk17Image long_name;
  long_name.image.field(std::string(300, 'A'), "_x", 0);
  EXPECT_EQ(failure_of(parse(long_name.image.input())), VmStructsFailure::kUnreadable);
  Jdk17Image control;
  control.image.type("Bad\x01Type", 8);
  const VmStructsResult bad = parse(control.image.input());
  ASSERT_EQ(failure_of(bad), VmStructsFailure::kUnreadable);
  EXPECT_NE(std::get<VmStructsError>(bad).message.find("not a name"), std::string::npos);
}

// Every prefix of an image ends in tables or an error.
TEST(HotSpotFakeImage, TruncatedImagesGiveErrors) {
  const std::string input = Jdk17Image().image.input();
  for (size_t size = 0; size < input.size(); size += 5) {
    const VmStructsResult result = parse(input.substr(0, size));
    EXPECT_TRUE(std::holds_alternative<VmStructsError>(result)) << size;
  }
}

TEST(HotSpotFakeImage, LayoutSaysWhatIsMissing) {
  fake::Image image;
  for (const fake::FieldOffset& f : fake::kJdk17Fields)
    if (std::string(f.field) != "_frame_size" && std::string(f.type) != "Symbol")
      image.field(f.type, f.field, f.offset);
  image.field("Symbol", "_length", 100);  // past sizeof(Symbol) below: implausible
  image.field("Symbol", "_body", 6);
  image.type("Symbol", 8);
  const VmStructsResult result = parse(image.input());
  const auto layout = hotspot_layout(value_of(result));
  ASSERT_TRUE(std::holds_alternative<LayoutMissing>(layout));
  const std::string& reason = std::get<LayoutMissing>(layout).reason;
  EXPECT_NE(reason.find("CodeBlob::_frame_size"), std::string::npos) << reason;
  EXPECT_NE(reason.find("CodeCache::_low_bound"), std::string::npos) << reason;
  EXPECT_NE(reason.find("sizeof(ConstantPool)"), std::string::npos) << reason;
  EXPECT_NE(reason.find("Symbol::_length at implausible offset 100"), std::string::npos) << reason;
  EXPECT_EQ(reason.find('\n'), std::string::npos);
}

// A Method whose pointers lead elsewhere gives a reason, never a name.
TEST(HotSpotFakeImage, HostileMethodsGiveReasons) {
  auto name_after = [](auto change) -> std::string {
    Jdk17Image fake;
    change(fake.image, fake.method);
    const std::string input = fake.image.input();
    const VmStructsResult result = parse(input);
    const HotSpotLayout l = std::get<HotSpotLayout>(hotspot_layout(std::get<VmStructs>(result)));
    BufferMemory memory;
    fake::load(input, memory);
    RemoteReader reader(memory, 1 << 20, 256);
    const auto name = read_method_name(reader, l, fake.method.method);
    if (const auto* error = std::get_if<MethodNameError>(&name)) return error->reason;
    return "named " + std::get<JavaMethodName>(name).qualified();
  };
  using fake::FakeMethod;
  using fake::Image;
  EXPECT_EQ(name_after([](Image&, FakeMethod&) {}), "named fixture.HotLoop.spin");
  // Each change of the Method's metadata, and the words its reason must hold.
  const std::pair<void (*)(Image&, FakeMethod&), const char*> changes[] = {
      {[](Image& i, FakeMethod& m) { i.put<uint64_t>(m.method + 8, 0); }, "Method::_constMethod"},
      {[](Image& i, FakeMethod& m) { i.put<uint16_t>(m.const_method + 34, 3); }, "not UTF-8"},
      {[](Image& i, FakeMethod& m) { i.put<uint16_t>(m.const_method + 36, 900); },
       "outside a pool"},
      {[](Image& i, FakeMethod& m) { i.put<uint64_t>(m.holder + 232, m.tags); }, "not a Method"},
      {[](Image& i, FakeMethod& m) { i.put<uint16_t>(m.class_name + 4, 60000); }, "bytes long"},
      {[](Image& i, FakeMethod& m) { i.put<uint16_t>(m.class_name + 4, 200); }, "class name"},
      {[](Image& i, FakeMethod& m) { i.put<int32_t>(m.tags, 3); }, "not as long as the pool"},
  };
  for (const auto& [change, reason] : changes) {
    const std::string said = name_after(change);
    EXPECT_NE(said.find(reason), std::string::npos) << said << " should say " << reason;
  }
}

// A thread's track keeps the name it ran under: main() returning renames the launcher's thread
// DestroyJavaVM, which names nothing it ran; a rename otherwise is taken.
TEST(JavaThreadNames, TheMainThreadKeepsItsNameAfterMainReturns) {
  std::string name;
  keep_java_thread_name(name, "main");
  keep_java_thread_name(name, "DestroyJavaVM");
  EXPECT_EQ(name, "main");
  keep_java_thread_name(name, "renamed");
  EXPECT_EQ(name, "renamed");
  std::string first_seen_late;
  keep_java_thread_name(first_seen_late, "DestroyJavaVM");  // read only then: nothing better
  EXPECT_EQ(first_seen_late, "DestroyJavaVM");
}

}  // namespace
}  // namespace bpfprof::hotspot
