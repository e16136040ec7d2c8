// A pretend JVM's memory for the HotSpot table reader (runtimes/hotspot): HotSpot's four
// tables laid out as JDK 17 lays them out (entries of 48, 40, 16 and 16 bytes), the entries
// the walk's layout needs with JDK 17's offsets, and one Method with its constant pool,
// holder and Symbols. The unit tests change its bytes to make it hostile; the fuzzer starts
// from it (its input is the 21 symbol words, then the image).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "runtimes/hotspot/vm_structs.h"
#include "runtimes/kit/remote_memory.h"

namespace bpfprof::hotspot::fake {

constexpr uint64_t kSymbolsAt = 0x10000;  // the 21 symbol words, in enum VmSymbol's order
constexpr uint64_t kImageAt = 0x20000;    // everything else
constexpr size_t kSymbolBytes = kVmSymbolCount * 8;

inline VmSymbolAddresses symbol_addresses() {
  VmSymbolAddresses symbols;
  for (size_t i = 0; i < kVmSymbolCount; ++i) symbols.address[i] = kSymbolsAt + 8 * i;
  return symbols;
}

// A fuzz input (or a test's image) placed in memory: symbol words, then the image.
inline void load(std::string_view input, BufferMemory& memory) {
  std::string symbols(input.substr(0, kSymbolBytes));
  symbols.resize(kSymbolBytes, '\0');
  memory.place(kSymbolsAt, std::move(symbols));
  if (input.size() > kSymbolBytes) memory.place(kImageAt, std::string(input.substr(kSymbolBytes)));
}

class Image {
 public:
  // Room for `size` bytes, 8-aligned, zeroed: its address.
  uint64_t reserve(size_t size) {
    const uint64_t at = kImageAt + bytes_.size();
    bytes_.resize(bytes_.size() + (size + 7) / 8 * 8, '\0');
    return at;
  }
  uint64_t string(std::string_view text) {
    const uint64_t at = reserve(text.size() + 1);
    write(at, text.data(), text.size());
    return at;
  }
  void write(uint64_t address, const void* data, size_t size) {
    memcpy(bytes_.data() + (address - kImageAt), data, size);
  }
  template <typename T>
  void put(uint64_t address, T value) {
    write(address, &value, sizeof(value));
  }
  void set_symbol(VmSymbol symbol, uint64_t value) {
    memcpy(symbols_.data() + 8 * static_cast<size_t>(symbol), &value, 8);
  }
  uint64_t symbol(VmSymbol symbol) const {
    uint64_t value = 0;
    memcpy(&value, symbols_.data() + 8 * static_cast<size_t>(symbol), 8);
    return value;
  }

  void field(std::string_view type, std::string_view name, uint64_t offset) {
    fields_ += entry48(string(type), string(name), 0, 0, offset, 0);
  }
  void static_field(std::string_view type, std::string_view name, uint64_t address) {
    fields_ += entry48(string(type), string(name), string("address"), 1, 0, address);
  }
  void type(std::string_view name, uint64_t size) {
    std::string entry(40, '\0');
    const uint64_t name_at = string(name);
    memcpy(entry.data(), &name_at, 8);
    memcpy(entry.data() + 32, &size, 8);
    types_ += entry;
  }
  void int_constant(std::string_view name, int32_t value) {
    ints_ += entry16(string(name), static_cast<uint32_t>(value));
  }
  void long_constant(std::string_view name, uint64_t value) {
    longs_ += entry16(string(name), value);
  }

  // The symbol words and the image, the tables placed at its end the first time (each ended
  // by an entry of zeros) and the entry layout symbols set as JDK 17 sets them.
  // Later calls give the same layout, with symbols set since.
  std::string input() {
    if (!laid_out_) lay_out();
    laid_out_ = true;
    return symbols_ + bytes_;
  }

 private:
  void lay_out() {
    using S = VmSymbol;
    const std::pair<S, std::string*> tables[] = {{S::kStructs, &fields_},
                                                 {S::kTypes, &types_},
                                                 {S::kIntConstants, &ints_},
                                                 {S::kLongConstants, &longs_}};
    const uint64_t strides[] = {48, 40, 16, 16};
    for (size_t i = 0; i < 4; ++i) {
      const std::string& entries = *tables[i].second;
      const uint64_t at = reserve(entries.size() + strides[i]);
      write(at, entries.data(), entries.size());
      set_symbol(tables[i].first, at);
    }
    const std::pair<S, uint64_t> layout[] = {
        {S::kStructTypeName, 0},    {S::kStructFieldName, 8},     {S::kStructTypeString, 16},
        {S::kStructIsStatic, 24},   {S::kStructOffset, 32},       {S::kStructAddress, 40},
        {S::kStructStride, 48},     {S::kTypeTypeName, 0},        {S::kTypeSuperclassName, 8},
        {S::kTypeSize, 32},         {S::kTypeStride, 40},         {S::kIntConstantName, 0},
        {S::kIntConstantValue, 8},  {S::kIntConstantStride, 16},  {S::kLongConstantName, 0},
        {S::kLongConstantValue, 8}, {S::kLongConstantStride, 16},
    };
    for (const auto& [symbol, value] : layout) set_symbol(symbol, value);
  }
  static std::string entry48(uint64_t type, uint64_t name, uint64_t type_string, int32_t is_static,
                             uint64_t offset, uint64_t address) {
    std::string entry(48, '\0');
    memcpy(entry.data(), &type, 8);
    memcpy(entry.data() + 8, &name, 8);
    memcpy(entry.data() + 16, &type_string, 8);
    memcpy(entry.data() + 24, &is_static, 4);
    memcpy(entry.data() + 32, &offset, 8);
    memcpy(entry.data() + 40, &address, 8);
    return entry;
  }
  static std::string entry16(uint64_t name, uint64_t value) {
    std::string entry(16, '\0');
    memcpy(entry.data(), &name, 8);
    memcpy(entry.data() + 8, &value, 8);
    return entry;
  }

  std::string symbols_ = std::string(kSymbolBytes, '\0');
  std::string bytes_;
  std::string fields_, types_, ints_, longs_;
  bool laid_out_ = false;
};

// The fields HotSpotLayout takes, at JDK 17's offsets (x86_64, Debian's 17.0.15).
struct FieldOffset {
  const char* type;
  const char* field;
  uint64_t offset;
};
inline constexpr FieldOffset kJdk17Fields[] = {
    {"GrowableArrayBase", "_len", 0},
    {"GrowableArray<int>", "_data", 8},
    {"CodeHeap", "_memory", 8},
    {"CodeHeap", "_segmap", 120},
    {"CodeHeap", "_log2_segment_size", 256},
    {"VirtualSpace", "_low", 16},
    {"VirtualSpace", "_high", 24},
    {"HeapBlock::Header", "_used", 8},
    {"CodeBlob", "_name", 96},
    {"CodeBlob", "_size", 12},
    {"CodeBlob", "_frame_size", 28},
    {"CodeBlob", "_frame_complete_offset", 20},
    {"CodeBlob", "_code_begin", 32},
    {"CodeBlob", "_code_end", 40},
    {"CompiledMethod", "_method", 112},
    {"nmethod", "_compile_id", 304},
    {"Method", "_constMethod", 8},
    {"ConstMethod", "_constants", 8},
    {"ConstMethod", "_name_index", 34},
    {"ConstMethod", "_signature_index", 36},
    {"ConstantPool", "_tags", 8},
    {"ConstantPool", "_pool_holder", 24},
    {"ConstantPool", "_length", 60},
    {"Array<int>", "_length", 0},
    {"Array<u1>", "_data", 4},
    {"InstanceKlass", "_constants", 232},
    {"Klass", "_name", 24},
    {"Symbol", "_length", 4},
    {"Symbol", "_body", 6},
    {"ThreadsList", "_length", 4},
    {"ThreadsList", "_threads", 16},
    {"JavaThread", "_anchor", 656},
    {"JavaFrameAnchor", "_last_Java_sp", 0},
    {"JavaFrameAnchor", "_last_Java_pc", 8},
    {"JavaFrameAnchor", "_last_Java_fp", 16},
    {"JavaThread", "_osthread", 560},
    {"OSThread", "_thread_id", 208},
    {"JavaThread", "_threadObj", 648},
    {"StubQueue", "_stub_buffer", 8},
    {"StubQueue", "_buffer_limit", 20},
};
inline constexpr const char* kJdk17Statics[][2] = {
    {"CodeCache", "_low_bound"},      {"CodeCache", "_high_bound"},
    {"CodeCache", "_heaps"},          {"ThreadsSMRSupport", "_java_thread_list"},
    {"AbstractInterpreter", "_code"},
};

// The constant pool of the one Method: slot 1 its name, slot 2 its signature, slot 3 a class.
struct FakeMethod {
  uint64_t method = 0;
  uint64_t const_method = 0;
  uint64_t pool = 0;
  uint64_t tags = 0;
  uint64_t holder = 0;
  uint64_t class_name = 0;  // the Symbol
};

inline uint64_t symbol(Image& image, std::string_view text) {
  const uint64_t at = image.reserve(8 + text.size());
  image.put<uint16_t>(at + 4, static_cast<uint16_t>(text.size()));
  image.write(at + 6, text.data(), text.size());
  return at;
}

// fixture.HotLoop.spin(JI)J, laid out as JDK 17 lays out its metadata.
inline FakeMethod jdk17_method(Image& image) {
  FakeMethod m;
  m.method = image.reserve(88);
  m.const_method = image.reserve(48);
  m.pool = image.reserve(72 + 4 * 8);
  m.tags = image.reserve(4 + 4);
  m.holder = image.reserve(464);
  m.class_name = symbol(image, "fixture/HotLoop");
  image.put(m.method + 8, m.const_method);
  image.put(m.const_method + 8, m.pool);
  image.put<uint16_t>(m.const_method + 34, 1);
  image.put<uint16_t>(m.const_method + 36, 2);
  image.put(m.pool + 8, m.tags);
  image.put(m.pool + 24, m.holder);
  image.put<int32_t>(m.pool + 60, 4);
  image.put<int32_t>(m.tags, 4);
  const uint8_t tags[4] = {0, 1, 1, 7};  // JVMS: none, Utf8, Utf8, Class
  image.write(m.tags + 4, tags, sizeof(tags));
  image.put(m.pool + 72 + 8, symbol(image, "spin"));
  image.put(m.pool + 72 + 16, symbol(image, "(JI)J"));
  image.put(m.holder + 232, m.pool);
  image.put(m.holder + 24, m.class_name);
  return m;
}

// The tables with everything HotSpotLayout takes; statics point into the image.
inline void jdk17_tables(Image& image) {
  for (const FieldOffset& f : kJdk17Fields) image.field(f.type, f.field, f.offset);
  for (const auto& s : kJdk17Statics) image.static_field(s[0], s[1], image.reserve(8));
  image.type("ConstantPool", 72);
  image.type("HeapBlock", 16);
  image.type("JavaThread", 1384);
  image.type("CodeBlob", 104);
  image.int_constant("frame::interpreter_frame_sender_sp_offset", -1);
  image.int_constant("frame::interpreter_frame_last_sp_offset", -2);
  image.long_constant("markWord::hash_bits", 31);
}

// The fuzzer's seed: JDK 17's tables and one Method, whose address is the image's first word.
inline std::string jdk17_seed() {
  Image image;
  const uint64_t method_slot = image.reserve(8);
  jdk17_tables(image);
  image.put(method_slot, jdk17_method(image).method);
  return image.input();
}

}  // namespace bpfprof::hotspot::fake
