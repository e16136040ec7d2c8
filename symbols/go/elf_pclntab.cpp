// Finding a Go binary's pclntab, runtime.text and go:func.* in the bytes of its ELF file:
// from the section headers when they are there, else from the program headers and the
// runtime's moduledata, which points at all three.
#include <algorithm>
#include <utility>
#include <vector>

#include "symbols/go/bytes.h"
#include "symbols/go/pclntab.h"

namespace bpfprof::go {

namespace {

constexpr uint32_t kPtLoad = 1;
constexpr uint32_t kPtGnuRelro = 0x6474e552;
constexpr uint32_t kPfExecute = 1;
constexpr uint32_t kPfWrite = 2;
constexpr uint32_t kShtRela = 4;
constexpr uint32_t kShtNobits = 8;
constexpr uint32_t kRelX86_64Relative = 8;
constexpr uint32_t kRelAarch64Relative = 1027;

// Candidates tried, each a full header check: magic-like words in data are rare, and a
// hostile file full of them costs at most this many.
constexpr int kMaxPclntabCandidates = 8;
constexpr int kMaxModuledataCandidates = 64;
// Relative relocations kept (16 bytes each): a large Go PIE has about a million; a file with
// more is not one the Go linker wrote, and what is past the cap is not read.
constexpr size_t kMaxRelocations = 4 << 20;

// Word indexes in runtime.moduledata (runtime/symtab.go): pcHeader, five slices (funcnametab
// first), ftab, findfunctab, minpc, maxpc, then text; gofunc follows types, etypes and
// rodata, two words later since 1.20 added covctrs and ecovctrs.
constexpr uint64_t kModuledataFuncnametab = 1;
constexpr uint64_t kModuledataText = 22;
constexpr uint64_t kModuledataGofunc118 = 38;
constexpr uint64_t kModuledataGofunc120 = 40;

struct Segment {
  uint64_t vaddr = 0;
  uint64_t offset = 0;
  uint64_t file_size = 0;
  uint32_t flags = 0;
  bool relro = false;  // writable only until the loader has relocated it
  // Where Go's tables are: read-only data, or (a position-independent binary's) data the
  // loader relocates and then makes read-only.
  bool read_only() const { return !(flags & kPfExecute) && (!(flags & kPfWrite) || relro); }
};

struct Section {
  std::string_view name;
  uint32_t type = 0;
  uint64_t addr = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct ElfView {
  Bytes file;
  bool is64 = true;
  uint8_t ptr_size = 8;
  std::vector<Segment> segments;
  std::vector<Section> sections;
  // R_*_RELATIVE relocations (offset, addend), sorted by offset: where a position-independent
  // binary's pointers are (the file holds 0 there, the relocation the address).
  std::vector<std::pair<uint64_t, uint64_t>> relative;

  Bytes bytes_of(const Segment& s) const { return file.from(s.offset).prefix(s.file_size); }
  const Section* section(std::string_view name) const {
    for (const Section& s : sections)
      if (s.name == name) return &s;
    return nullptr;
  }
  bool in_read_only_segment(uint64_t vaddr) const {
    for (const Segment& s : segments)
      if (s.read_only() && vaddr >= s.vaddr && vaddr - s.vaddr < s.file_size) return true;
    return false;
  }
  // The pointer-sized word at `vaddr` as the loader leaves it.
  std::optional<uint64_t> word_at(uint64_t vaddr) const {
    auto it = std::lower_bound(relative.begin(), relative.end(), std::pair{vaddr, uint64_t{0}});
    if (it != relative.end() && it->first == vaddr) return it->second;
    for (const Segment& s : segments) {
      uint64_t value;
      if (vaddr >= s.vaddr && bytes_of(s).word(vaddr - s.vaddr, ptr_size, &value)) return value;
    }
    return std::nullopt;
  }
};

bool read_segments(ElfView& v, uint64_t phoff, uint16_t phentsize, uint16_t phnum) {
  std::vector<Segment> relro;
  for (uint64_t i = 0; i < phnum; ++i) {
    Bytes ph = v.file.from(phoff + i * phentsize).prefix(phentsize);
    uint32_t type;
    Segment s;
    bool ok = ph.u32(0, &type);
    if (v.is64) {
      ok = ok && ph.u32(4, &s.flags) && ph.u64(8, &s.offset) && ph.u64(16, &s.vaddr) &&
           ph.u64(32, &s.file_size);
    } else {
      uint32_t offset = 0, vaddr = 0, file_size = 0;
      ok = ok && ph.u32(4, &offset) && ph.u32(8, &vaddr) && ph.u32(16, &file_size) &&
           ph.u32(24, &s.flags);
      s.offset = offset, s.vaddr = vaddr, s.file_size = file_size;
    }
    if (!ok) return false;
    if (type == kPtLoad && v.file.fits(s.offset, s.file_size)) v.segments.push_back(s);
    if (type == kPtGnuRelro) relro.push_back(s);
  }
  for (Segment& s : v.segments)
    for (const Segment& r : relro)
      s.relro = s.relro || (s.vaddr >= r.vaddr && s.vaddr - r.vaddr < r.file_size);
  return true;
}

void read_sections(ElfView& v, uint64_t shoff, uint16_t shentsize, uint16_t shnum,
                   uint16_t shstrndx) {
  auto header = [&](uint64_t i, Section* s, uint32_t* name) {
    Bytes sh = v.file.from(shoff + i * shentsize).prefix(shentsize);
    if (v.is64)
      return sh.u32(0, name) && sh.u32(4, &s->type) && sh.u64(16, &s->addr) &&
             sh.u64(24, &s->offset) && sh.u64(32, &s->size);
    uint32_t addr, offset, size;
    if (!sh.u32(0, name) || !sh.u32(4, &s->type) || !sh.u32(12, &addr) || !sh.u32(16, &offset) ||
        !sh.u32(20, &size))
      return false;
    s->addr = addr, s->offset = offset, s->size = size;
    return true;
  };
  Section strings;
  uint32_t ignored;
  if (shstrndx >= shnum || !header(shstrndx, &strings, &ignored)) return;
  Bytes names = v.file.from(strings.offset).prefix(strings.size);
  for (uint64_t i = 0; i < shnum; ++i) {
    Section s;
    uint32_t name;
    if (!header(i, &s, &name)) continue;
    s.name = names.cstring(name).value_or("");
    v.sections.push_back(s);
  }
}

void read_relative_relocations(ElfView& v) {
  if (!v.is64) return;
  for (const Section& s : v.sections) {
    if (s.type != kShtRela || !v.file.fits(s.offset, s.size)) continue;
    Bytes table = v.file.from(s.offset).prefix(s.size);
    for (uint64_t at = 0; at + 24 <= table.size() && v.relative.size() < kMaxRelocations;
         at += 24) {
      uint64_t offset = 0, info = 0, addend = 0;  // the loop's bound keeps the reads inside
      table.u64(at, &offset), table.u64(at + 8, &info), table.u64(at + 16, &addend);
      const uint32_t type = static_cast<uint32_t>(info);
      if (type == kRelX86_64Relative || type == kRelAarch64Relative)
        v.relative.emplace_back(offset, addend);
    }
  }
  std::sort(v.relative.begin(), v.relative.end());
}

bool parse_elf(Bytes file, ElfView* v, std::string* error) {
  uint8_t ident[6];
  for (int i = 0; i < 6; ++i)
    if (!file.u8(i, &ident[i])) return false;
  if (ident[0] != 0x7f || ident[1] != 'E' || ident[2] != 'L' || ident[3] != 'F' ||
      (ident[4] != 1 && ident[4] != 2) || ident[5] != 1) {
    if (error) *error = "not a little-endian ELF file";
    return false;
  }
  v->file = file;
  v->is64 = ident[4] == 2;
  v->ptr_size = v->is64 ? 8 : 4;
  uint64_t phoff = 0, shoff = 0;
  uint16_t phentsize = 0, phnum = 0, shentsize = 0, shnum = 0, shstrndx = 0;
  const uint64_t at = v->is64 ? 0x36 : 0x2a;  // e_phentsize and the four halves after it
  bool ok = file.u16(at, &phentsize) && file.u16(at + 2, &phnum) && file.u16(at + 4, &shentsize) &&
            file.u16(at + 6, &shnum) && file.u16(at + 8, &shstrndx);
  if (v->is64) {
    ok = ok && file.u64(0x20, &phoff) && file.u64(0x28, &shoff);
  } else {
    uint32_t ph32 = 0, sh32 = 0;
    ok = ok && file.u32(0x1c, &ph32) && file.u32(0x20, &sh32);
    phoff = ph32, shoff = sh32;
  }
  if (!ok || phentsize < (v->is64 ? 56 : 32) || !read_segments(*v, phoff, phentsize, phnum)) {
    if (error) *error = "ELF program headers out of bounds";
    return false;
  }
  if (shoff && shentsize >= (v->is64 ? 64 : 40))
    read_sections(*v, shoff, shentsize, shnum, shstrndx);
  read_relative_relocations(*v);
  return true;
}

struct Found {
  std::span<const uint8_t> bytes;
  uint64_t vaddr = 0;
};

// The `.gopclntab` section, else the first place in a read-only segment whose header reads
// as a pclntab's (runtime.pclntab of a binary whose section headers were removed).
std::optional<Found> find_pclntab(const ElfView& v) {
  // A position-independent binary's is .data.rel.ro.gopclntab.
  for (std::string_view name : {".gopclntab", ".data.rel.ro.gopclntab"}) {
    if (const Section* s = v.section(name);
        s && s->type != kShtNobits && v.file.fits(s->offset, s->size))
      return Found{v.file.from(s->offset).prefix(s->size).span(), s->addr};
  }
  int candidates = 0;
  for (const Segment& segment : v.segments) {
    if (!segment.read_only()) continue;
    Bytes bytes = v.bytes_of(segment);
    for (uint64_t at = 0; at + 16 <= bytes.size(); at += 4) {
      uint32_t magic = 0;
      uint8_t pad1 = 0, pad2 = 0, quantum = 0, ptr_size = 0;
      bytes.u32(at, &magic);
      if (!format_of_magic(magic)) continue;
      bytes.u8(at + 4, &pad1), bytes.u8(at + 5, &pad2), bytes.u8(at + 6, &quantum);
      bytes.u8(at + 7, &ptr_size);
      if (pad1 || pad2 || quantum == 0 || quantum > 4 || ptr_size != v.ptr_size) continue;
      if (looks_like_pclntab(bytes.from(at).span()))
        return Found{bytes.from(at).span(), segment.vaddr + at};
      if (++candidates >= kMaxPclntabCandidates) return std::nullopt;
    }
  }
  return std::nullopt;
}

struct Moduledata {
  uint64_t text = 0;
  std::optional<uint64_t> gofunc;
};

// The runtime.moduledata that points at this pclntab: its first word is the pclntab's
// address and its second the name table's.
std::optional<Moduledata> find_moduledata(const ElfView& v, const Found& pcln,
                                          PclntabFormat format) {
  const uint8_t p = v.ptr_size;
  uint64_t names_offset;
  if (!Bytes(pcln.bytes).word(8 + 3ull * p, p, &names_offset)) return std::nullopt;
  std::vector<uint64_t> candidates;
  for (const auto& [offset, addend] : v.relative)
    if (addend == pcln.vaddr && candidates.size() < kMaxModuledataCandidates)
      candidates.push_back(offset);
  // runtime.firstmoduledata is data (.noptrdata): the writable segments only.
  for (const Segment& segment : v.segments) {
    if ((segment.flags & kPfExecute) || !(segment.flags & kPfWrite)) continue;
    Bytes bytes = v.bytes_of(segment);
    for (uint64_t at = 0; at + p <= bytes.size() && candidates.size() < kMaxModuledataCandidates;
         at += p) {
      uint64_t value;
      if (bytes.word(at, p, &value) && value == pcln.vaddr)
        candidates.push_back(segment.vaddr + at);
    }
  }
  const uint64_t expected =
      format == PclntabFormat::kGo118 ? kModuledataGofunc118 : kModuledataGofunc120;
  for (size_t i = 0; i < candidates.size() && i < kMaxModuledataCandidates; ++i) {
    const uint64_t md = candidates[i];
    if (v.word_at(md + kModuledataFuncnametab * p) != pcln.vaddr + names_offset) continue;
    Moduledata found;
    found.text = v.word_at(md + kModuledataText * p).value_or(0);
    // gofunc lies in a read-only segment (.rodata, or .gopclntab since Go 1.26), after
    // rodata: tried at the index of its version, and a few words on should a newer runtime
    // add fields before it.
    for (uint64_t index = expected; index <= expected + 4 && !found.gofunc; index += 2) {
      std::optional<uint64_t> rodata = v.word_at(md + (index - 1) * p);
      std::optional<uint64_t> gofunc = v.word_at(md + index * p);
      if (rodata && gofunc && *rodata && *rodata <= *gofunc && v.in_read_only_segment(*gofunc))
        found.gofunc = gofunc;
    }
    return found;
  }
  return std::nullopt;
}

// The release from .go.buildinfo, else from .rodata (or, without section headers, the first
// read-only segment that is not code).
std::optional<GoRelease> release_of(const ElfView& v) {
  auto section_bytes = [&](const Section& s) {
    return v.file.from(s.offset).prefix(s.size).span();
  };
  if (const Section* s = v.section(".go.buildinfo"))
    if (std::optional<GoRelease> release = release_from_buildinfo(section_bytes(*s)))
      return release;
  if (const Section* s = v.section(".rodata")) return release_from_rodata(section_bytes(*s));
  for (const Segment& segment : v.segments)
    if (segment.read_only()) return release_from_rodata(v.bytes_of(segment).span());
  return std::nullopt;
}

}  // namespace

std::unique_ptr<GoTable> GoTable::from_elf(std::span<const uint8_t> file, std::string* error) {
  ElfView v;
  if (!parse_elf(Bytes(file), &v, error)) return nullptr;
  std::optional<Found> pcln = find_pclntab(v);
  if (!pcln) {
    if (error) *error = "no Go pclntab";
    return nullptr;
  }
  PclntabInput input;
  input.pclntab = pcln->bytes;
  input.pclntab_vaddr = pcln->vaddr;
  for (const Segment& segment : v.segments)
    if (segment.read_only()) input.memory.push_back({segment.vaddr, v.bytes_of(segment).span()});
  input.release = release_of(v);
  uint32_t magic = 0;
  Bytes(pcln->bytes).u32(0, &magic);
  const std::optional<PclntabFormat> format = format_of_magic(magic);
  if (format == PclntabFormat::kGo118 || format == PclntabFormat::kGo120) {
    std::optional<Moduledata> md = find_moduledata(v, *pcln, *format);
    if (md) input.gofunc = md->gofunc;
    // The header's textStart as the loader relocates it is runtime.text; a binary linked by
    // an external linker has C code before it in .text, so the section is the last resort.
    uint64_t text = v.word_at(pcln->vaddr + 8 + 2ull * v.ptr_size).value_or(0);
    if (!text && md) text = md->text;
    if (const Section* s = v.section(".text"); !text && s) text = s->addr;
    if (text) input.text_start = text;
  }
  return from_pclntab(input, error);
}

}  // namespace bpfprof::go
