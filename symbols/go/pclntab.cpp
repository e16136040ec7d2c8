#include "symbols/go/pclntab.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "symbols/go/bytes.h"

namespace bpfprof::go {

namespace {

constexpr uint32_t kMagic12 = 0xfffffffb;
constexpr uint32_t kMagic116 = 0xfffffffa;
constexpr uint32_t kMagic118 = 0xfffffff0;
constexpr uint32_t kMagic120 = 0xfffffff1;

// runtime/symtab.go: the pc-value table that says which inlined call a pc is in.
constexpr uint32_t kPcdataInlTreeIndex = 2;
// The funcdata slot of the inline tree: 4 while FUNCDATA_RegPointerMaps existed (Go 1.12 to
// 1.15, the 1.2 format), 3 since.
constexpr uint32_t kFuncdataInlTree12 = 4;
constexpr uint32_t kFuncdataInlTree = 3;

// A pc-value table has one entry per change of value; the longest Go functions have a few
// ten thousand. The cap bounds a lookup in a table that never ends.
constexpr size_t kMaxPcvalueSteps = 1 << 18;
// Deeper inlining than Go's inliner produces (its budget stops far earlier): a cap that ends
// a cycle of parent pcs.
constexpr int kMaxInlineDepth = 64;
// An inline tree index past this is not one the compiler wrote.
constexpr int32_t kMaxInlineIndex = 1 << 20;

// Offsets of a _func record's fields from its start (runtime2.go's _func for each format).
struct FuncLayout {
  uint32_t entry_size;    // the entry: a pointer before 1.18, a 4-byte text offset since
  uint32_t cu_at;         // cuOffset; 0 in the 1.2 format, which has one file table
  uint32_t nfuncdata_at;  // the last byte of the fixed part
  uint32_t fixed_size;    // where the pcdata offsets start
};

FuncLayout layout_of(PclntabFormat format, uint8_t ptr_size) {
  // After the entry: nameoff, args, deferreturn, pcsp, pcfile, pcln, npcdata (4 bytes each).
  switch (format) {
    case PclntabFormat::kGo12:
      return {ptr_size, 0, ptr_size + 31u, ptr_size + 32u};
    case PclntabFormat::kGo116:
      return {ptr_size, ptr_size + 28u, ptr_size + 35u, ptr_size + 36u};
    case PclntabFormat::kGo118:
      return {4, 32, 39, 40};
    case PclntabFormat::kGo120:
      return {4, 32, 43, 44};  // startLine after cuOffset
  }
  return {4, 32, 43, 44};
}

// One inlinedCall record of the inline tree (runtime/symtabinl.go): where the name offset
// and the parent pc are.
struct InlineLayout {
  uint32_t size;
  uint32_t name_at;
  uint32_t parent_pc_at;
};

InlineLayout inline_layout_of(PclntabFormat format) {
  // 1.20+: funcID, 3 bytes of padding, nameOff, parentPc, startLine. Before: parent (int16),
  // funcID, a pad byte, file, line, func_ (the name), parentPc.
  if (format == PclntabFormat::kGo120) return {16, 4, 8};
  return {20, 12, 16};
}

// A pc-value table read step by step: each step's value holds from the previous step's end
// (the function's entry at first) up to its own end.
enum class PcvalueStep : uint8_t { kValue, kEnd, kUnreadable };

class PcvalueSteps {
 public:
  PcvalueSteps(Bytes table, uint64_t entry, uint8_t quantum)
      : table_(table), entry_(entry), pc_(entry), quantum_(quantum) {}

  PcvalueStep next() {
    uint32_t uvdelta, pcdelta;
    if (++steps_ > kMaxPcvalueSteps || !table_.varint(&pos_, &uvdelta))
      return PcvalueStep::kUnreadable;
    if (uvdelta == 0 && pc_ != entry_) return PcvalueStep::kEnd;  // the table's end marker
    value_ += (uvdelta & 1) ? ~(uvdelta >> 1) : (uvdelta >> 1);
    if (!table_.varint(&pos_, &pcdelta)) return PcvalueStep::kUnreadable;
    pc_ += static_cast<uint64_t>(pcdelta) * quantum_;
    return PcvalueStep::kValue;
  }
  uint64_t end() const { return pc_; }
  int32_t value() const { return static_cast<int32_t>(value_); }

 private:
  Bytes table_;
  uint64_t entry_;
  uint64_t pc_;
  uint8_t quantum_;
  uint64_t pos_ = 0;
  size_t steps_ = 0;
  uint32_t value_ = static_cast<uint32_t>(-1);  // wraps like Go's int32 arithmetic, without UB
};

}  // namespace

std::optional<PclntabFormat> format_of_magic(uint32_t magic) {
  switch (magic) {
    case kMagic12:
      return PclntabFormat::kGo12;
    case kMagic116:
      return PclntabFormat::kGo116;
    case kMagic118:
      return PclntabFormat::kGo118;
    case kMagic120:
      return PclntabFormat::kGo120;
    default:
      return std::nullopt;
  }
}

std::string_view format_name(PclntabFormat format) {
  switch (format) {
    case PclntabFormat::kGo12:
      return "go1.2";
    case PclntabFormat::kGo116:
      return "go1.16";
    case PclntabFormat::kGo118:
      return "go1.18";
    case PclntabFormat::kGo120:
      return "go1.20";
  }
  return "unknown";
}

struct GoTable::State {
  PclntabFormat format = PclntabFormat::kGo120;
  uint8_t ptr_size = 8;
  uint8_t quantum = 1;
  FuncLayout layout{};
  uint64_t nfunc = 0;
  uint64_t text_start = 0;  // 1.18+
  uint64_t pcln_vaddr = 0;
  std::optional<GoRelease> release;
  Bytes pcln;             // the whole table
  Bytes funcnames;        // name offsets are relative to this
  Bytes cutab;            // 1.16+: per-CU file indexes
  Bytes filetab;          // 1.16+: file names; 1.2: the file offsets, count first
  Bytes pctab;            // pc-value table offsets are relative to this
  Bytes funcs;            // functab offsets (_func records) are relative to this
  uint64_t funcs_at = 0;  // where `funcs` starts in `pcln`
  Bytes ftab;             // nfunc + 1 (entry, funcoff) pairs
  std::optional<uint64_t> gofunc;
  std::vector<std::vector<uint8_t>> storage;
  std::vector<MemoryRange> memory;

  // A _func record, its fields read once.
  struct Func {
    uint64_t at = 0;  // offset in `funcs`
    uint64_t entry = 0;
    uint64_t end = 0;
    uint32_t nameoff = 0;
    uint32_t pcsp = 0;
    uint32_t pcfile = 0;
    uint32_t pcln = 0;
    uint32_t npcdata = 0;
    uint32_t cu = 0;
    uint8_t nfuncdata = 0;
    uint8_t flag = 0;  // 1.17+ (funcFlag); 0 before
  };

  bool ftab_entry(uint64_t i, uint64_t* entry, uint64_t* funcoff) const;
  std::optional<Func> func_at(uint64_t pc) const;
  std::optional<std::string_view> name(uint32_t nameoff) const;
  std::optional<int32_t> pcvalue(uint32_t off, uint64_t entry, uint64_t target) const;
  // Every (range, value) of a pc-value table, up to `end` at most; false when it cannot be
  // read.
  TracebackEnd traceback_end(const Func& f) const;
  bool pcvalue_ranges(uint32_t off, uint64_t entry, uint64_t end,
                      std::vector<SpDelta>* ranges) const;
  std::optional<int32_t> pcdata(const Func& f, uint32_t table, uint64_t pc) const;
  std::optional<uint64_t> funcdata(const Func& f, uint32_t slot) const;
  std::string file(const Func& f, uint64_t pc) const;
  uint32_t line(const Func& f, uint64_t pc) const;
  bool read_memory(uint64_t vaddr, size_t size, void* out) const;
  void add_inline_frames(const Func& f, uint64_t pc, std::vector<GoFrame>* innermost_first) const;
};

bool GoTable::State::ftab_entry(uint64_t i, uint64_t* entry, uint64_t* funcoff) const {
  if (format == PclntabFormat::kGo118 || format == PclntabFormat::kGo120) {
    uint32_t entryoff, off;
    if (!ftab.u32(i * 8, &entryoff) || !ftab.u32(i * 8 + 4, &off)) return false;
    *entry = text_start + entryoff;
    *funcoff = off;
    return true;
  }
  return ftab.word(i * 2 * ptr_size, ptr_size, entry) &&
         ftab.word(i * 2 * ptr_size + ptr_size, ptr_size, funcoff);
}

std::optional<GoTable::State::Func> GoTable::State::func_at(uint64_t pc) const {
  uint64_t first, last, ignored;
  if (!ftab_entry(0, &first, &ignored) || !ftab_entry(nfunc, &last, &ignored)) return {};
  if (pc < first || pc >= last) return {};
  // The last entry at or below pc: entries are sorted in a table the linker wrote; in any
  // other, the search still ends after log2(nfunc) steps with some entry.
  uint64_t lo = 0, hi = nfunc;  // entry(lo) <= pc < entry(hi)
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2, entry;
    if (!ftab_entry(mid, &entry, &ignored)) return {};
    (entry <= pc ? lo : hi) = mid;
  }
  Func f;
  uint64_t funcoff;
  if (!ftab_entry(lo, &f.entry, &funcoff) || !ftab_entry(lo + 1, &f.end, &ignored)) return {};
  if (pc < f.entry || pc >= f.end) return {};
  f.at = funcoff;
  const uint64_t e = layout.entry_size;
  if (!funcs.u32(f.at + e, &f.nameoff) || !funcs.u32(f.at + e + 12, &f.pcsp) ||
      !funcs.u32(f.at + e + 16, &f.pcfile) || !funcs.u32(f.at + e + 20, &f.pcln) ||
      !funcs.u32(f.at + e + 24, &f.npcdata) || !funcs.u8(f.at + layout.nfuncdata_at, &f.nfuncdata))
    return {};
  if (layout.cu_at && !funcs.u32(f.at + layout.cu_at, &f.cu)) return {};
  // funcID, flag, a pad byte, then nfuncdata; the 1.2 format (Go 1.15 and before) had no flag.
  if (format != PclntabFormat::kGo12 && !funcs.u8(f.at + layout.nfuncdata_at - 2, &f.flag))
    return {};
  // The record's own entry must agree with the functab's: else the offset is not a _func.
  uint64_t own_entry;
  if (e == 4) {
    uint32_t entryoff;
    if (!funcs.u32(f.at, &entryoff)) return {};
    own_entry = text_start + entryoff;
  } else if (!funcs.word(f.at, ptr_size, &own_entry)) {
    return {};
  }
  // In the 1.2 format name offset 0 is the table's header: no name.
  if (own_entry != f.entry || (format == PclntabFormat::kGo12 && f.nameoff == 0)) return {};
  return f;
}

std::optional<std::string_view> GoTable::State::name(uint32_t nameoff) const {
  std::optional<std::string_view> s = funcnames.cstring(nameoff);
  if (!s || s->empty()) return {};
  return s;
}

std::optional<int32_t> GoTable::State::pcvalue(uint32_t off, uint64_t entry,
                                               uint64_t target) const {
  if (off == 0) return {};
  PcvalueSteps steps(pctab.from(off), entry, quantum);
  while (steps.next() == PcvalueStep::kValue)
    if (target < steps.end()) return steps.value();
  return {};
}

bool GoTable::State::pcvalue_ranges(uint32_t off, uint64_t entry, uint64_t end,
                                    std::vector<SpDelta>* ranges) const {
  if (off == 0) return false;
  PcvalueSteps steps(pctab.from(off), entry, quantum);
  for (uint64_t start = entry; start < end;) {
    switch (steps.next()) {
      case PcvalueStep::kValue:
        break;
      // The table ends at the function's last instruction, before the fill up to the next
      // function's entry.
      case PcvalueStep::kEnd:
        return true;
      case PcvalueStep::kUnreadable:
        return false;
    }
    if (steps.end() == start) return false;  // a range of no pc: not a table Go wrote
    const uint64_t next = std::min(end, steps.end());
    ranges->push_back({start, next, steps.value()});
    start = next;
  }
  return true;
}

std::optional<int32_t> GoTable::State::pcdata(const Func& f, uint32_t table, uint64_t pc) const {
  uint32_t off;
  if (table >= f.npcdata || !funcs.u32(f.at + layout.fixed_size + 4ull * table, &off)) return {};
  return pcvalue(off, f.entry, pc);
}

std::optional<uint64_t> GoTable::State::funcdata(const Func& f, uint32_t slot) const {
  if (slot >= f.nfuncdata) return {};
  uint64_t at = f.at + layout.fixed_size + 4ull * f.npcdata;
  if (format == PclntabFormat::kGo118 || format == PclntabFormat::kGo120) {
    uint32_t off;
    if (!gofunc || !funcs.u32(at + 4ull * slot, &off) || off == UINT32_MAX) return {};
    return *gofunc + off;
  }
  // Pointers, aligned in memory to their size.
  if (ptr_size == 8 && ((pcln_vaddr + funcs_at + at) & 4)) at += 4;
  uint64_t address;
  if (!funcs.word(at + static_cast<uint64_t>(slot) * ptr_size, ptr_size, &address) || !address)
    return {};
  return address;
}

std::string GoTable::State::file(const Func& f, uint64_t pc) const {
  std::optional<int32_t> fileno = pcvalue(f.pcfile, f.entry, pc);
  if (!fileno || *fileno < 0) return {};
  uint32_t off;
  if (format == PclntabFormat::kGo12) {
    // Index 0 holds the count.
    if (*fileno == 0 || !filetab.u32(4ull * static_cast<uint32_t>(*fileno), &off)) return {};
    return std::string(pcln.cstring(off).value_or(""));
  }
  if (!cutab.u32(4ull * (static_cast<uint64_t>(f.cu) + static_cast<uint32_t>(*fileno)), &off) ||
      off == UINT32_MAX)
    return {};
  return std::string(filetab.cstring(off).value_or(""));
}

uint32_t GoTable::State::line(const Func& f, uint64_t pc) const {
  std::optional<int32_t> line = pcvalue(f.pcln, f.entry, pc);
  return line && *line > 0 ? static_cast<uint32_t>(*line) : 0;
}

bool GoTable::State::read_memory(uint64_t vaddr, size_t size, void* out) const {
  for (const MemoryRange& range : memory) {
    if (vaddr < range.vaddr || vaddr - range.vaddr > range.bytes.size() ||
        range.bytes.size() - (vaddr - range.vaddr) < size)
      continue;
    memcpy(out, range.bytes.data() + (vaddr - range.vaddr), size);
    return true;
  }
  return false;
}

void GoTable::State::add_inline_frames(const Func& f, uint64_t pc,
                                       std::vector<GoFrame>* innermost_first) const {
  const uint32_t slot = format == PclntabFormat::kGo12 ? kFuncdataInlTree12 : kFuncdataInlTree;
  std::optional<uint64_t> tree = funcdata(f, slot);
  const InlineLayout inl = inline_layout_of(format);
  uint64_t cursor = pc;
  for (int depth = 0; tree && depth < kMaxInlineDepth; ++depth) {
    std::optional<int32_t> index = pcdata(f, kPcdataInlTreeIndex, cursor);
    if (!index || *index < 0 || *index > kMaxInlineIndex) break;
    const uint64_t record = *tree + static_cast<uint64_t>(*index) * inl.size;
    uint32_t nameoff;
    int32_t parent_pc;
    if (!read_memory(record + inl.name_at, 4, &nameoff) ||
        !read_memory(record + inl.parent_pc_at, 4, &parent_pc))
      break;
    std::optional<std::string_view> called = name(nameoff);
    if (!called) break;
    innermost_first->push_back({std::string(*called), file(f, cursor), line(f, cursor)});
    // The parent pc is an instruction of the caller whose position is the call's.
    if (parent_pc < 0 || f.entry + static_cast<uint64_t>(parent_pc) >= f.end) break;
    cursor = f.entry + static_cast<uint64_t>(parent_pc);
  }
  std::optional<std::string_view> outer = name(f.nameoff);
  innermost_first->push_back({std::string(outer.value_or("")), file(f, cursor), line(f, cursor)});
}

GoTable::GoTable(std::unique_ptr<State> state) : state_(std::move(state)) {}
GoTable::~GoTable() = default;

PclntabFormat GoTable::format() const { return state_->format; }
size_t GoTable::function_count() const { return state_->nfunc; }
bool GoTable::has_inline_trees() const {
  return state_->format == PclntabFormat::kGo12 || state_->format == PclntabFormat::kGo116 ||
         state_->gofunc.has_value();
}

uint64_t GoTable::text_begin() const {
  uint64_t entry = 0, ignored;
  state_->ftab_entry(0, &entry, &ignored);
  return entry;
}

uint64_t GoTable::text_end() const {
  uint64_t entry = 0, ignored;
  state_->ftab_entry(state_->nfunc, &entry, &ignored);
  return entry;
}

std::optional<GoFunction> GoTable::function_at(uint64_t pc) const {
  std::optional<State::Func> f = state_->func_at(pc);
  if (!f) return {};
  std::optional<std::string_view> name = state_->name(f->nameoff);
  if (!name) return {};
  return GoFunction{*name, f->entry, f->end};
}

std::optional<GoFunction> GoTable::function(size_t index) const {
  uint64_t entry, ignored;
  if (index >= state_->nfunc || !state_->ftab_entry(index, &entry, &ignored)) return {};
  std::optional<GoFunction> f = function_at(entry);
  if (!f || f->entry != entry) return {};
  return f;
}

std::vector<GoFrame> GoTable::frames_at(uint64_t pc) const {
  std::optional<State::Func> f = state_->func_at(pc);
  if (!f || !state_->name(f->nameoff)) return {};
  std::vector<GoFrame> frames;
  state_->add_inline_frames(*f, pc, &frames);
  std::reverse(frames.begin(), frames.end());
  return frames;
}

namespace {

// runtime/symtab.go's funcFlag bits (Go 1.17+).
constexpr uint8_t kFlagTopFrame = 1 << 0;
constexpr uint8_t kFlagSpWrite = 1 << 1;

// Whether `name` is one of `functions`, as Go names them in assembly or with their ABI0 suffix.
bool is_one_of(std::string_view name, std::initializer_list<std::string_view> functions) {
  if (name.ends_with(".abi0")) name.remove_suffix(5);
  return std::find(functions.begin(), functions.end(), name) != functions.end();
}

// Before the flags (and for tables whose flags are not set): the runtime functions that have
// them since.
TracebackEnd traceback_end_by_name(std::string_view name) {
  if (is_one_of(name, {"runtime.goexit", "runtime.mstart", "runtime.rt0_go"}))
    return TracebackEnd::kTopFrame;
  if (is_one_of(name, {"runtime.systemstack", "runtime.mcall", "runtime.morestack", "runtime.gogo",
                       "gogo"}))
    return TracebackEnd::kStackSwitch;
  return TracebackEnd::kNo;
}

}  // namespace

bool is_signal_trampoline(std::string_view name) {
  return is_one_of(name, {"runtime.sigtramp", "runtime.cgoSigtramp"});
}

bool is_signal_return(std::string_view name) {
  return is_one_of(name, {"runtime.sigreturn", "runtime.sigreturn__sigaction"});
}

TracebackEnd GoTable::State::traceback_end(const Func& f) const {
  if (f.flag & kFlagTopFrame) return TracebackEnd::kTopFrame;
  if (f.flag & kFlagSpWrite) return TracebackEnd::kStackSwitch;
  std::optional<std::string_view> function = name(f.nameoff);
  return function ? traceback_end_by_name(*function) : TracebackEnd::kNo;
}

std::optional<GoRelease> GoTable::release() const { return state_->release; }

std::optional<bool> GoTable::is_root_at(uint64_t pc) const {
  std::optional<State::Func> f = state_->func_at(pc);
  if (!f) return {};
  const std::optional<std::string_view> function = state_->name(f->nameoff);
  if (!function) return {};
  switch (state_->traceback_end(*f)) {
    case TracebackEnd::kTopFrame:
      return !is_signal_trampoline(*function);
    case TracebackEnd::kStackSwitch:
      // The scheduler's roots on the system stack: mcall's, and morestack's where the walk
      // stops at it (past its switch it goes on into the goroutine; it stops where newstack
      // has descheduled that goroutine, m.curg gone).
      return is_one_of(*function, {"runtime.mcall", "runtime.morestack"});
    case TracebackEnd::kNo:
      break;
  }
  // The ELF entry point, which jumps to rt0_go before it has a frame.
  return is_one_of(*function, {"_rt0_amd64_linux", "_rt0_amd64"});
}

std::optional<FrameLayout> GoTable::frame_layout(size_t index) const {
  uint64_t entry, ignored;
  if (index >= state_->nfunc || !state_->ftab_entry(index, &entry, &ignored)) return {};
  std::optional<State::Func> f = state_->func_at(entry);
  if (!f || f->entry != entry || !state_->name(f->nameoff)) return {};
  FrameLayout layout;
  if (!state_->pcvalue_ranges(f->pcsp, f->entry, f->end, &layout.sp)) return {};
  layout.end = state_->traceback_end(*f);
  return layout;
}

namespace {

// The tables of the header (runtime.pcHeader; the 1.2 format's one table), checked to lie in
// the pclntab and to hold nfunc + 1 functab entries.
bool read_header(GoTable::State& s, const PclntabInput& input, std::string* error) {
  const Bytes& t = s.pcln;
  const uint8_t p = s.ptr_size;
  auto word = [&](uint32_t k, uint64_t* out) { return t.word(8 + k * p, p, out); };
  uint64_t field_size = p;
  if (s.format == PclntabFormat::kGo12) {
    uint64_t fileoff32;
    if (!word(0, &s.nfunc)) return false;
    s.funcnames = s.pctab = s.funcs = t;
    s.ftab = t.from(8 + p);
    uint32_t fileoff;
    if (s.nfunc > t.size() || !s.ftab.u32((2 * s.nfunc + 1) * p, &fileoff)) return false;
    fileoff32 = fileoff;
    s.filetab = t.from(fileoff32);
  } else {
    const bool has_text = s.format != PclntabFormat::kGo116;
    const uint32_t k = has_text ? 1 : 0;  // the tables' words follow textStart
    uint64_t nfiles, names, cus, files, pcs, funcs;
    if (!word(0, &s.nfunc) || !word(1, &nfiles) || !word(2 + k, &names) || !word(3 + k, &cus) ||
        !word(4 + k, &files) || !word(5 + k, &pcs) || !word(6 + k, &funcs))
      return false;
    if (has_text) {
      uint64_t header_text = 0;
      word(2, &header_text);
      s.text_start = input.text_start.value_or(header_text);
      if (s.text_start == 0) {
        if (error) *error = "no text start for the pclntab's entries";
        return false;
      }
      field_size = 4;
    }
    s.funcnames = t.from(names);
    s.cutab = t.from(cus);
    s.filetab = t.from(files);
    s.pctab = t.from(pcs);
    s.funcs = s.ftab = t.from(funcs);
    s.funcs_at = funcs;
  }
  if (s.nfunc == 0 || s.nfunc > s.ftab.size() / (2 * field_size) ||
      s.ftab.size() < (2 * s.nfunc + 1) * field_size) {
    if (error) *error = "pclntab function table out of bounds";
    return false;
  }
  if (s.format == PclntabFormat::kGo12) s.ftab = s.ftab.prefix((2 * s.nfunc + 1) * field_size);
  return true;
}

// The header and function table of `s->pcln` read into *s, without copying anything.
bool read_table(GoTable::State* s, const PclntabInput& input, std::string* error) {
  uint32_t magic;
  uint8_t pad1, pad2;
  if (!s->pcln.u32(0, &magic) || !s->pcln.u8(4, &pad1) || !s->pcln.u8(5, &pad2) ||
      !s->pcln.u8(6, &s->quantum) || !s->pcln.u8(7, &s->ptr_size)) {
    if (error) *error = "pclntab shorter than its header";
    return false;
  }
  std::optional<PclntabFormat> format = format_of_magic(magic);
  if (!format || pad1 || pad2 || (s->quantum != 1 && s->quantum != 2 && s->quantum != 4) ||
      (s->ptr_size != 4 && s->ptr_size != 8)) {
    if (error) *error = "no pclntab header (magic, pc quantum, pointer size)";
    return false;
  }
  s->format = *format;
  s->layout = layout_of(s->format, s->ptr_size);
  if (!read_header(*s, input, error)) {
    if (error && error->empty()) *error = "pclntab header out of bounds";
    return false;
  }
  uint64_t first, last, ignored;
  if (!s->ftab_entry(0, &first, &ignored) || !s->ftab_entry(s->nfunc, &last, &ignored) ||
      first >= last) {
    if (error) *error = "pclntab function table not in pc order";
    return false;
  }
  return true;
}

}  // namespace

bool looks_like_pclntab(std::span<const uint8_t> bytes) {
  GoTable::State s;
  s.pcln = Bytes(bytes);
  PclntabInput input;
  input.text_start = 1;  // the entries' order is checked, not where they are
  return read_table(&s, input, nullptr);
}

std::unique_ptr<GoTable> GoTable::from_pclntab(const PclntabInput& input, std::string* error) {
  auto s = std::make_unique<State>();
  // The memory ranges first, then the pclntab as a view of the one that holds it (a Go binary's
  // read-only segment holds both), else a copy of its own.
  for (const MemoryRange& range : input.memory) {
    s->storage.emplace_back(range.bytes.begin(), range.bytes.end());
    s->memory.push_back({range.vaddr, s->storage.back()});
  }
  std::span<const uint8_t> pcln;
  for (const MemoryRange& range : s->memory) {
    const uint64_t at = input.pclntab_vaddr - range.vaddr;
    if (input.pclntab_vaddr >= range.vaddr && at <= range.bytes.size() &&
        range.bytes.size() - at >= input.pclntab.size() &&
        memcmp(range.bytes.data() + at, input.pclntab.data(), input.pclntab.size()) == 0) {
      pcln = range.bytes.subspan(at, input.pclntab.size());
      break;
    }
  }
  if (pcln.empty() && !input.pclntab.empty()) {
    s->storage.emplace_back(input.pclntab.begin(), input.pclntab.end());
    pcln = s->storage.back();
  }
  s->pcln = Bytes(pcln);
  s->pcln_vaddr = input.pclntab_vaddr;
  s->gofunc = input.gofunc;
  s->release = input.release;
  if (!read_table(s.get(), input, error)) return nullptr;
  return std::unique_ptr<GoTable>(new GoTable(std::move(s)));
}

}  // namespace bpfprof::go
