#include "userspace/capture/core_btf.h"

#include <bpf/btf.h>
#include <gelf.h>
#include <libelf.h>

#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace bpfprof {
namespace {

// The kinds of CO-RE relocation (libbpf's enum bpf_core_relo_kind, as .BTF.ext holds them):
// 0-5 on fields, 6 the object's own type id, 7-12 on types and enum values.
enum class CoreReloKind : uint32_t {
  kFieldRshiftU64 = 5,
  kTypeIdLocal = 6,
  kTypeMatches = 12,
};

struct BtfSections {
  std::string btf;
  std::string ext;
};

// The object's .BTF and .BTF.ext sections, copied out of its ELF image.
BtfSections btf_sections(std::span<const uint8_t> object_elf) {
  if (elf_version(EV_CURRENT) == EV_NONE) throw std::runtime_error("libelf is unusable");
  std::vector<char> image(object_elf.begin(), object_elf.end());  // elf_memory wants it writable
  std::unique_ptr<Elf, decltype(&elf_end)> elf(elf_memory(image.data(), image.size()), &elf_end);
  size_t names = 0;
  if (!elf || elf_getshdrstrndx(elf.get(), &names) != 0)
    throw std::runtime_error("the BPF object is not an ELF file");
  BtfSections sections;
  for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn; scn = elf_nextscn(elf.get(), scn)) {
    GElf_Shdr header;
    if (!gelf_getshdr(scn, &header)) continue;
    const char* name = elf_strptr(elf.get(), names, header.sh_name);
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!name || !data || !data->d_buf) continue;
    std::string bytes(static_cast<const char*>(data->d_buf), data->d_size);
    if (std::strcmp(name, ".BTF") == 0) sections.btf = std::move(bytes);
    if (std::strcmp(name, ".BTF.ext") == 0) sections.ext = std::move(bytes);
  }
  if (sections.btf.empty()) throw std::runtime_error("the BPF object has no .BTF section");
  return sections;
}

uint32_t read_u32(std::string_view bytes, size_t at) {
  if (at > bytes.size() || bytes.size() - at < 4)
    throw std::runtime_error("the BPF object's .BTF.ext is cut short");
  uint32_t value;
  std::memcpy(&value, bytes.data() + at, 4);
  return value;
}

struct CoreRelo {
  uint32_t type_id;
  CoreReloKind kind;
};

// The CO-RE relocations of .BTF.ext (header, then per section: its name, its count, and the
// records of `record_size` bytes: instruction offset, type id, access string, kind).
std::vector<CoreRelo> core_relocations(std::string_view ext) {
  if (ext.empty()) return {};
  if (ext.size() < 8 || static_cast<uint8_t>(ext[0]) != 0x9f ||
      static_cast<uint8_t>(ext[1]) != 0xeb)
    throw std::runtime_error("the BPF object's .BTF.ext has no BTF magic");
  const uint32_t header_size = read_u32(ext, 4);
  if (header_size < 32) return {};  // no CO-RE part in this header
  const uint32_t offset = read_u32(ext, 24);
  const uint32_t size = read_u32(ext, 28);
  if (uint64_t{header_size} + offset + size > ext.size())
    throw std::runtime_error("the BPF object's CO-RE relocations lie past .BTF.ext's end");
  const std::string_view part = ext.substr(header_size + offset, size);
  if (part.empty()) return {};
  const uint32_t record_size = read_u32(part, 0);
  if (record_size < 16) throw std::runtime_error("the BPF object's CO-RE records are too small");
  std::vector<CoreRelo> relocations;
  for (size_t at = 4; at < part.size();) {
    const uint32_t count = read_u32(part, at + 4);
    at += 8;
    if (count > (part.size() - at) / record_size)
      throw std::runtime_error("the BPF object's CO-RE records lie past their part's end");
    for (uint32_t i = 0; i < count; ++i, at += record_size)
      relocations.push_back({read_u32(part, at + 4), CoreReloKind{read_u32(part, at + 12)}});
  }
  return relocations;
}

// Candidates are matched by kind as libbpf does: an enum of either width for an enum.
int kind_class(int kind) { return kind == BTF_KIND_ENUM64 ? BTF_KIND_ENUM : kind; }

// A local type's name without its flavour ("task_struct___old" is a task_struct).
std::string essential_name(std::string_view name) {
  return std::string(name.substr(0, name.find("___")));
}

bool is_modifier(int kind) {
  return kind == BTF_KIND_CONST || kind == BTF_KIND_VOLATILE || kind == BTF_KIND_RESTRICT ||
         kind == BTF_KIND_TYPE_TAG;
}

// Writes kernel types into a new BTF, each once (see core_btf.h).
class MinimalBtfWriter {
 public:
  explicit MinimalBtfWriter(const btf& kernel)
      : kernel_(kernel), out_(btf__new_empty(), &btf__free) {
    if (!out_) throw std::runtime_error("cannot make a BTF");
  }

  int type(uint32_t id) {
    if (id == 0) return 0;
    if (auto it = written_.find(id); it != written_.end()) return it->second;
    const btf_type* t = btf__type_by_id(&kernel_, id);
    if (!t) throw std::runtime_error("the kernel's BTF has no type " + std::to_string(id));
    const int out = write(t);
    if (out < 0)
      throw std::runtime_error("cannot write the kernel's BTF type " + std::to_string(id));
    written_.emplace(id, out);
    return out;
  }

  std::string bytes() const {
    uint32_t size = 0;
    const void* data = btf__raw_data(out_.get(), &size);
    if (!data) throw std::runtime_error("cannot lay out the minimal BTF");
    return std::string(static_cast<const char*>(data), size);
  }

 private:
  const char* name_of(const btf_type* t) const {
    return btf__name_by_offset(&kernel_, t->name_off);
  }

  int write(const btf_type* t) {
    const char* name = name_of(t);
    const int kind = btf_kind(t);
    if (is_modifier(kind)) return type(t->type);
    switch (kind) {
      case BTF_KIND_INT:
        return btf__add_int(out_.get(), name, t->size, btf_int_encoding(t));
      case BTF_KIND_FLOAT:
        return btf__add_float(out_.get(), name, t->size);
      case BTF_KIND_PTR:
        return void_pointer();
      case BTF_KIND_ARRAY: {
        const struct btf_array* array = btf_array(t);
        const int element = type(array->type);
        const int index = type(array->index_type);
        return btf__add_array(out_.get(), index, element, array->nelems);
      }
      case BTF_KIND_STRUCT:
      case BTF_KIND_UNION:
        return write_composite(t, name);
      case BTF_KIND_ENUM:
      case BTF_KIND_ENUM64:
        return write_enum(t, name);
      case BTF_KIND_FWD:
        return btf__add_fwd(out_.get(), name, btf_kflag(t) ? BTF_FWD_UNION : BTF_FWD_STRUCT);
      case BTF_KIND_TYPEDEF: {
        const int target = type(t->type);
        return btf__add_typedef(out_.get(), name, target);
      }
      default:
        throw std::runtime_error(std::string("a CO-RE relocation reaches the kernel's type ") +
                                 (name && *name ? name : "(anonymous)") + " of BTF kind " +
                                 std::to_string(kind) + ", which this does not write");
    }
  }

  // Its members' types first: a struct's fields must follow it directly.
  int write_composite(const btf_type* t, const char* name) {
    const btf_member* members = btf_members(t);
    const uint16_t count = btf_vlen(t);
    std::vector<int> member_types(count);
    for (uint16_t i = 0; i < count; ++i) member_types[i] = type(members[i].type);
    const int id = btf_kind(t) == BTF_KIND_UNION ? btf__add_union(out_.get(), name, t->size)
                                                 : btf__add_struct(out_.get(), name, t->size);
    if (id < 0) return id;
    for (uint16_t i = 0; i < count; ++i) {
      const int err = btf__add_field(out_.get(), btf__name_by_offset(&kernel_, members[i].name_off),
                                     member_types[i], btf_member_bit_offset(t, i),
                                     btf_member_bitfield_size(t, i));
      if (err) return err;
    }
    return id;
  }

  int write_enum(const btf_type* t, const char* name) {
    const uint16_t count = btf_vlen(t);
    if (btf_kind(t) == BTF_KIND_ENUM) {
      const int id = btf__add_enum(out_.get(), name, t->size);
      for (uint16_t i = 0; id > 0 && i < count; ++i) {
        const struct btf_enum& e = btf_enum(t)[i];
        if (int err = btf__add_enum_value(out_.get(), btf__name_by_offset(&kernel_, e.name_off),
                                          btf_kflag(t) ? e.val : static_cast<uint32_t>(e.val)))
          return err;
      }
      return id;
    }
    const int id = btf__add_enum64(out_.get(), name, t->size, btf_kflag(t));
    for (uint16_t i = 0; id > 0 && i < count; ++i) {
      const struct btf_enum64* e = &btf_enum64(t)[i];
      if (int err = btf__add_enum64_value(out_.get(), btf__name_by_offset(&kernel_, e->name_off),
                                          btf_enum64_value(e)))
        return err;
    }
    return id;
  }

  int void_pointer() {
    if (!void_pointer_) void_pointer_ = btf__add_ptr(out_.get(), 0);
    return *void_pointer_;
  }

  const btf& kernel_;
  std::unique_ptr<btf, decltype(&btf__free)> out_;
  std::unordered_map<uint32_t, int> written_;
  std::optional<int> void_pointer_;
};

struct RootName {
  std::string name;
  int kind;
  bool operator==(const RootName&) const = default;
};
struct RootNameHash {
  size_t operator()(const RootName& r) const { return std::hash<std::string>()(r.name) ^ r.kind; }
};

// The types the relocations are rooted at, by essential name and kind, added to `roots`.
void add_relocation_roots(const btf& local, const std::vector<CoreRelo>& relos,
                          std::unordered_set<RootName, RootNameHash>& roots) {
  for (const CoreRelo& relo : relos) {
    if (relo.kind == CoreReloKind::kTypeIdLocal) continue;  // the object's own type
    if (relo.kind > CoreReloKind::kTypeMatches)
      throw std::runtime_error("the BPF object has a CO-RE relocation of an unknown kind");
    const btf_type* t = btf__type_by_id(&local, relo.type_id);
    while (t && is_modifier(btf_kind(t))) t = btf__type_by_id(&local, t->type);
    if (!t) throw std::runtime_error("a CO-RE relocation names no type of the object");
    const bool on_fields = relo.kind <= CoreReloKind::kFieldRshiftU64;
    if (!on_fields && btf_kind(t) == BTF_KIND_PTR)
      throw std::runtime_error("a CO-RE relocation is on a pointer type, which is not written");
    const char* name = btf__name_by_offset(&local, t->name_off);
    if (!name || !*name) continue;  // anonymous roots cannot be relocated (libbpf refuses)
    roots.insert({essential_name(name), kind_class(btf_kind(t))});
  }
}

}  // namespace

std::string minimal_core_btf(const btf& kernel,
                             std::initializer_list<std::span<const uint8_t>> object_elves) {
  std::unordered_set<RootName, RootNameHash> roots;
  for (std::span<const uint8_t> object_elf : object_elves) {
    const BtfSections sections = btf_sections(object_elf);
    std::unique_ptr<btf, decltype(&btf__free)> local(
        btf__new(sections.btf.data(), static_cast<uint32_t>(sections.btf.size())), &btf__free);
    if (!local) throw std::runtime_error("the BPF object's .BTF cannot be read");
    add_relocation_roots(*local, core_relocations(sections.ext), roots);
  }
  // The names alone first, as views: the kernel has some 130,000 types to look at.
  std::unordered_set<std::string_view> root_names;
  for (const RootName& root : roots) root_names.insert(root.name);
  MinimalBtfWriter writer(kernel);
  const uint32_t count = btf__type_cnt(&kernel);
  for (uint32_t id = 1; id < count; ++id) {
    const btf_type* t = btf__type_by_id(&kernel, id);
    const char* name = btf__name_by_offset(&kernel, t->name_off);
    if (name && *name && root_names.contains(name) &&
        roots.contains({name, kind_class(btf_kind(t))}))
      writer.type(id);
  }
  return writer.bytes();
}

uint32_t tracepoint_btf_id(const btf& kernel, std::string_view tracepoint) {
  const std::string name = "btf_trace_" + std::string(tracepoint);
  const int32_t id = btf__find_by_name_kind(&kernel, name.c_str(), BTF_KIND_TYPEDEF);
  return id > 0 ? static_cast<uint32_t>(id) : 0;
}

}  // namespace bpfprof
