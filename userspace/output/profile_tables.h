// The tables of a Firefox Profiler processed profile (format 70), each owning its columns
// and writing itself as JSON. Rows are added during the build phase and get typed indices,
// so a frame index cannot be stored where a func index is meant; serialization happens
// afterwards and changes nothing (write_json is const), so the order in which the tables
// are written is free.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

#include "symbols/symbolizer.h"
#include "userspace/model/clocks.h"
#include "userspace/model/ids.h"
#include "userspace/model/prefix_tree.h"
#include "userspace/model/session_model.h"
#include "userspace/output/json_writer.h"
#include "userspace/output/string_table.h"

namespace bpfprof {

using LibIndex = StrongId<struct LibIndexTag, uint32_t>;
using ResourceIndex = StrongId<struct ResourceIndexTag, uint32_t>;
using SourceIndex = StrongId<struct SourceIndexTag, uint32_t>;
using FuncIndex = StrongId<struct FuncIndexTag, uint32_t>;
using NativeSymbolIndex = StrongId<struct NativeSymbolIndexTag, uint32_t>;
using FrameIndex = StrongId<struct FrameIndexTag, uint32_t>;
using StackIndex = StrongId<struct StackIndexTag, uint32_t>;

// meta.categories, in this order: frames store the position.
enum class Category : uint8_t {
  kOther = 0,
  kUser = 1,
  kKernel = 2,
  kIdle = 3,  // named "Idle": the front end's "include idle" switch hides these
  kWaitingForCpu = 4,
  // Then each runtime's frames (bpf/runtime_list.h), in RuntimeKind's order.
  kFirstRuntime = 5,
};
struct CategoryInfo {
  const char* name;
  const char* color;
};
inline constexpr CategoryInfo kCategories[] = {{"Other", "grey"},
                                               {"User", "yellow"},
                                               {"Kernel", "orange"},
                                               {"Idle", "transparent"},
                                               {"Waiting for CPU", "lightblue"},
#define BPFPROF_RUNTIME_CATEGORY(ID, id, Kind, language, colour, event) {language, colour},
                                               BPFPROF_RUNTIME_LIST(BPFPROF_RUNTIME_CATEGORY)
#undef BPFPROF_RUNTIME_CATEGORY
};
static_assert(std::size(kCategories) ==
              static_cast<size_t>(Category::kFirstRuntime) + BPFPROF_RUNTIMES);

// A runtime's frames have the runtime's own category.
inline Category category_of(RuntimeKind runtime) {
  return static_cast<Category>(static_cast<uint8_t>(Category::kFirstRuntime) +
                               static_cast<uint8_t>(runtime));
}

// Writes the strings themselves as `stringArray`.
void write_string_array(JsonWriter& w, const StringTable& strings);

// `libs`: one entry per native library (and kernel module) that a frame points into.
class LibTable {
 public:
  LibIndex add(LibraryDescription library);
  const LibraryDescription& operator[](LibIndex i) const { return libs_[i.value]; }
  const std::vector<LibraryDescription>& rows() const { return libs_; }
  void write_json(JsonWriter& w) const;

 private:
  std::vector<LibraryDescription> libs_;
};

// `resourceTable`: one resource of type library per lib.
class ResourceTable {
 public:
  ResourceIndex add(StringIndex name);
  StringIndex name(ResourceIndex i) const { return names_[i.value]; }
  void write_json(JsonWriter& w) const;

 private:
  std::vector<StringIndex> names_;
};

// `sources`: the source files that functions are in.
class SourceTable {
 public:
  SourceIndex add(StringTable& strings, const std::string& filename);
  size_t size() const { return filenames_.size(); }
  StringIndex filename(SourceIndex i) const { return filenames_[i.value]; }
  // The file's text, for the source view without a symbol server (`content`).
  void set_content(SourceIndex i, std::string text);
  void write_json(JsonWriter& w) const;

 private:
  std::vector<StringIndex> filenames_;
  std::vector<std::optional<std::string>> contents_;  // by source; empty until one is set
  std::unordered_map<std::string, SourceIndex> index_;
};

// `funcTable`: one function per (resource, name, source, first line).
class FuncTable {
 public:
  struct Func {
    StringIndex name;
    std::optional<ResourceIndex> resource;
    std::optional<SourceIndex> source;
    // Interpreted (Python) code: `isJS`, so that the front end's JS-only ("Script") call
    // tree shows the program's own functions; with the line it starts at.
    bool is_script = false;
    std::optional<uint32_t> line_number{};
  };
  // The name is interned only when the function is new.
  FuncIndex add(StringTable& strings, std::string_view name, std::optional<ResourceIndex> resource,
                std::optional<SourceIndex> source = std::nullopt);
  // A function of interpreted code, in file `source` from `first_line` on.
  FuncIndex add_script(StringTable& strings, std::string_view name, SourceIndex source,
                       uint32_t first_line);
  const Func& operator[](FuncIndex i) const { return funcs_[i.value]; }
  void write_json(JsonWriter& w) const;

 private:
  std::vector<Func> funcs_;
  // By resource, name, source and first line (-1 for native code).
  std::map<std::tuple<int64_t, std::string, int64_t, int64_t>, FuncIndex> index_;
};

// `nativeSymbols`: the ELF symbols that frames lie in, one per (lib, address).
class NativeSymbolTable {
 public:
  struct Symbol {
    LibIndex lib;
    uint64_t address;
    StringIndex name;
    uint64_t size;  // 0: unknown
  };
  // The first symbol at (lib, address) wins; the name is interned only then.
  NativeSymbolIndex add(StringTable& strings, LibIndex lib, uint64_t address,
                        const std::string& name, uint64_t size);
  const Symbol& operator[](NativeSymbolIndex i) const { return symbols_[i.value]; }
  void write_json(JsonWriter& w) const;

 private:
  std::vector<Symbol> symbols_;
  std::map<std::pair<uint32_t, uint64_t>, NativeSymbolIndex> index_;
};

// `frameTable`: every distinct frame (an address with its inlining depth).
class FrameTable {
 public:
  struct Frame {
    std::optional<uint32_t> address;  // library-relative; the front end's column is 32-bit
    std::optional<LibIndex> lib;
    Category category = Category::kOther;
    FuncIndex func;
    std::optional<NativeSymbolIndex> native_symbol;
    uint32_t inline_depth = 0;
    std::optional<uint32_t> line;
    // A label set's frame (userspace/model/label_set.h), at the root of the stack it labels.
    bool is_label_set() const { return category == category_of(RuntimeKind::kGoLabels); }
  };
  FrameIndex add(const Frame& frame);
  const Frame& operator[](FrameIndex i) const { return frames_[i.value]; }
  size_t size() const { return frames_.size(); }
  void write_json(JsonWriter& w) const;

 private:
  std::vector<Frame> frames_;
};

// `stackTable`: a prefix tree of frames, parents before children.
class StackTable {
 public:
  StackIndex add(std::optional<StackIndex> prefix, FrameIndex frame);
  FrameIndex frame(StackIndex i) const { return FrameIndex{tree_.node(i.value).key}; }
  std::optional<StackIndex> prefix(StackIndex i) const;
  size_t size() const { return tree_.size(); }
  void write_json(JsonWriter& w) const;

 private:
  PrefixTree<uint32_t> tree_;  // of frame indices
};

// All of `shared`, and the strings every table's names index into.
struct SharedTables {
  StringTable strings;
  StackTable stacks;
  FrameTable frames;
  FuncTable funcs;
  ResourceTable resources;
  NativeSymbolTable native_symbols;
  SourceTable sources;

  void write_json(JsonWriter& w) const;
};

// A model stack's output stack (none for the empty stack), and a time as the profile writes
// it: ms since meta.startTime, in whole microseconds. Shared by the thread's tables.
std::optional<StackIndex> output_stack(const std::vector<StackIndex>& output_stack_of,
                                       StackId stack);
double profile_time_ms(MonotonicNs zero, MonotonicNs time);

// A thread's `samples`: the model's samples of the thread, turned into rows as they are
// read (a long recording has tens of millions; a copy doubled the writer's peak memory).
class SamplesTable {
 public:
  struct Sample {
    std::optional<StackIndex> stack;  // none: the empty stack
    double time_ms;                   // since meta.startTime, in whole microseconds
    uint64_t cpu_delta_ns;
    double weight;
  };
  SamplesTable() = default;
  // `output_stack_of`: the output stack of each model stack; `zero`: meta.startTime. The
  // model's samples must outlive the table.
  SamplesTable(const std::vector<ThreadSample>& samples,
               std::shared_ptr<const std::vector<StackIndex>> output_stack_of, MonotonicNs zero)
      : samples_(&samples), output_stack_of_(std::move(output_stack_of)), zero_(zero) {}

  size_t size() const { return samples_ ? samples_->size() : 0; }
  Sample row(size_t i) const;
  void write_json(JsonWriter& w) const;

 private:
  // One column of row i (the writer writes a column at a time).
  std::optional<StackIndex> stack_at(size_t i) const;
  double time_ms_at(size_t i) const;
  template <typename F>
  void write_column(JsonWriter& w, std::string_view name, F value) const;

  const std::vector<ThreadSample>* samples_ = nullptr;
  std::shared_ptr<const std::vector<StackIndex>> output_stack_of_;
  MonotonicNs zero_{0};
};

// A thread's `markers`: events lost in the ring buffer (instant), waits that a waking ended
// (interval, from the switch-out to the waking, with the waker's stack as the cause), and
// with --memory the sampled system calls that grew or shrank the address space (instant,
// with the caller's stack as the cause).
class MarkersTable {
 public:
  static constexpr const char* kEventsLostType = "bpfprof-lost";
  static constexpr const char* kWokenType = "bpfprof-woken";
  static constexpr const char* kAddressSpaceType = "bpfprof-address-space";
  struct EventsLost {
    uint64_t count;
    std::string process;  // "name (pid)"
  };
  struct Woken {
    std::string state;  // "sleeping", "I/O wait"
    double duration_ms;
    std::string waker;  // who, in a few words: "producer (1234)", "interrupt: hrtimer_wakeup"
    std::string waker_thread;  // the waker's thread name, or the interrupt context
    std::optional<int32_t> waker_tid;
    std::string waker_process;        // "name (pid)", empty for an interrupt
    std::optional<StackIndex> cause;  // the waker's stack, at the marker's end
  };
  struct AddressSpaceChange {
    std::string call;       // "mmap", "munmap", "brk", "mremap"
    int64_t change;         // bytes; < 0: shrank
    int64_t sampled_bytes;  // what the call stands for in the sampling
    uint64_t address;
    std::optional<StackIndex> cause;  // the caller's stack
  };
  struct Marker {
    StringIndex name;
    double start_ms;
    std::variant<EventsLost, Woken, AddressSpaceChange> data;
    std::optional<double> end_ms{};  // set: an interval marker (phase 1); else instant
  };
  void add(Marker marker) { markers_.push_back(std::move(marker)); }
  size_t size() const { return markers_.size(); }
  const std::vector<Marker>& markers() const { return markers_; }
  void write_json(JsonWriter& w) const;
  // The meta.markerSchema entries of kEventsLostType and kWokenType.
  static void write_events_lost_schema(JsonWriter& w);
  static void write_woken_schema(JsonWriter& w);
  static void write_address_space_schema(JsonWriter& w);

 private:
  std::vector<Marker> markers_;
};

// An empty struct-of-arrays table: each column an empty array, length 0.
void write_empty_table(JsonWriter& w, std::string_view name,
                       std::initializer_list<const char*> columns);

}  // namespace bpfprof
