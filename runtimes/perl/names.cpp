#include "runtimes/perl/names.h"

#include <algorithm>

namespace bpfprof {
namespace {

// A pointer a structure may hold: user space, 8-aligned.
bool perl_pointer(uint64_t p) { return p >= 0x10000 && p < (uint64_t{1} << 47) && !(p & 7); }

// The SV head's body and flags, if its type is `type`.
std::optional<std::pair<uint64_t, uint32_t>> sv_of_type(RemoteReader& reader, const PerlLayout& l,
                                                        uint64_t sv, uint32_t type) {
  if (!perl_pointer(sv)) return std::nullopt;
  const std::optional<uint64_t> body = reader.word(sv + l.sv_any);
  const std::optional<uint32_t> flags = reader.value<uint32_t>(sv + l.sv_flags);
  if (!body || !flags || (*flags & kPerlSvTypeMask) != type || !perl_pointer(*body))
    return std::nullopt;
  return std::pair{*body, *flags};
}

// A HEK's text: printable, no NUL, within the bound.
std::optional<std::string> hek_text(RemoteReader& reader, const PerlLayout& l, uint64_t hek) {
  if (!perl_pointer(hek)) return std::nullopt;
  const std::optional<int32_t> length = reader.value<int32_t>(hek + l.hek_len);
  if (!length || *length < 1 || *length > kMaxPerlNameBytes) return std::nullopt;
  std::string text(static_cast<size_t>(*length), '\0');
  if (!reader.read(hek + l.hek_key, text.data(), text.size())) return std::nullopt;
  if (std::any_of(text.begin(), text.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    return std::nullopt;
  return text;
}

// A GV's name and its stash, following GvEGV (the GV it is an alias of) once.
std::optional<std::string> gv_name(RemoteReader& reader, const PerlLayout& l, uint64_t gv) {
  auto head = sv_of_type(reader, l, gv, kPerlSvPvgv);
  if (!head || !(head->second & kPerlSvpGvGp)) return std::nullopt;
  const std::optional<uint64_t> gp = reader.word(gv + l.sv_u);
  const std::optional<uint64_t> egv =
      gp && perl_pointer(*gp) ? reader.word(*gp + l.gp_egv) : std::nullopt;
  if (egv && *egv && *egv != gv)
    if (auto effective = sv_of_type(reader, l, *egv, kPerlSvPvgv);
        effective && (effective->second & kPerlSvpGvGp))
      head = effective;
  const std::optional<uint64_t> name = reader.word(head->first + l.xgv_namehek);
  const std::optional<uint64_t> stash = reader.word(head->first + l.xgv_stash);
  std::optional<std::string> text = name ? hek_text(reader, l, *name) : std::nullopt;
  if (!text) return std::nullopt;
  const std::optional<std::string> package =
      stash ? read_perl_stash_name(reader, l, *stash) : std::nullopt;
  return package.value_or("__ANON__") + "::" + *text;
}

}  // namespace

std::optional<std::string> read_perl_stash_name(RemoteReader& reader, const PerlLayout& l,
                                                uint64_t stash) {
  const auto head = sv_of_type(reader, l, stash, kPerlSvPvhv);
  if (!head || !(head->second & kPerlSvfOok)) return std::nullopt;
  // 5.36 keeps the aux part in the body, after the plain HV's fields (struct xpvhv_with_aux).
  const uint64_t aux = head->first + l.xhv_aux;
  const std::optional<uint64_t> name = reader.word(aux + l.aux_name_u);
  const std::optional<int32_t> count = reader.value<int32_t>(aux + l.aux_name_count);
  if (!name || !*name || !count || *count > kMaxPerlStashNames || *count < -kMaxPerlStashNames)
    return std::nullopt;
  // With names (a stash renamed or aliased), name_u points to them: HvNAME is the first.
  const std::optional<uint64_t> hek = *count ? reader.word(*name) : name;
  return hek ? hek_text(reader, l, *hek) : std::nullopt;
}

std::optional<PerlSub> read_perl_sub(RemoteReader& reader, const PerlLayout& l, uint64_t cv) {
  const auto head = sv_of_type(reader, l, cv, kPerlSvPvcv);
  if (!head) return std::nullopt;
  const uint64_t body = head->first;
  const std::optional<uint64_t> stash = reader.word(body + l.xcv_stash);
  const std::optional<uint64_t> gv_u = reader.word(body + l.xcv_gv_u);
  const std::optional<uint32_t> flags = reader.value<uint32_t>(body + l.xcv_flags);
  if (!stash || !gv_u || !flags) return std::nullopt;
  std::optional<std::string> name;
  if (*flags & kPerlCvNamed) {
    name = hek_text(reader, l, *gv_u);
    if (name && !(*flags & kPerlCvLexical))
      name = read_perl_stash_name(reader, l, *stash).value_or("__ANON__") + "::" + *name;
  } else {
    name = gv_name(reader, l, *gv_u);
  }
  if (!name) return std::nullopt;
  return PerlSub{std::move(*name), (*flags & kPerlCvIsXsub) != 0};
}

std::optional<std::string> read_perl_frame_sub(RemoteReader& reader, const PerlLayout& l,
                                               uint64_t cv, uint64_t gv_u) {
  const auto head = sv_of_type(reader, l, cv, kPerlSvPvcv);
  if (head && reader.word(head->first + l.xcv_gv_u) == gv_u)
    if (std::optional<PerlSub> sub = read_perl_sub(reader, l, cv)) return std::move(sub->name);
  return gv_name(reader, l, gv_u);
}

std::optional<PerlSub> read_perl_xsub(RemoteReader& reader, const PerlLayout& l, uint64_t sv) {
  const std::optional<uint32_t> flags =
      perl_pointer(sv) ? reader.value<uint32_t>(sv + l.sv_flags) : std::nullopt;
  if (!flags) return std::nullopt;
  uint64_t cv = sv;
  if ((*flags & kPerlSvTypeMask) == kPerlSvPvgv && (*flags & kPerlSvpGvGp)) {
    const std::optional<uint64_t> gp = reader.word(sv + l.sv_u);
    const std::optional<uint64_t> gp_cv =
        gp && perl_pointer(*gp) ? reader.word(*gp + l.gp_cv) : std::nullopt;
    if (!gp_cv) return std::nullopt;
    cv = *gp_cv;
  } else if (*flags & kPerlSvfRok) {
    const std::optional<uint64_t> referent = reader.word(sv + l.sv_u);
    if (!referent) return std::nullopt;
    cv = *referent;
  }
  std::optional<PerlSub> sub = read_perl_sub(reader, l, cv);
  if (!sub || !sub->xsub) return std::nullopt;
  return sub;
}

std::optional<PerlStatement> read_perl_statement(RemoteReader& reader, const PerlLayout& l,
                                                 uint64_t cop) {
  if (!perl_pointer(cop)) return std::nullopt;
  const std::optional<uint32_t> line = reader.value<uint32_t>(cop + l.cop_line);
  const std::optional<uint64_t> file = reader.word(cop + l.cop_file);
  std::optional<std::string> text = file ? reader.c_string(*file) : std::nullopt;
  if (!line || !text) return std::nullopt;
  return PerlStatement{std::move(*text), *line};
}

}  // namespace bpfprof
