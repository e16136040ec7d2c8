#include "symbols/dwarf/code_gaps.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>

#include "symbols/dwarf/stack_height.h"

namespace bpfprof {
namespace {

// The length of the alignment fill instruction at `at` (the nop forms assemblers pad with:
// 0x90, `0f 1f /0` with any addressing, 0x66/0x2e prefixes; int3), or 0.
size_t fill_length(const uint8_t* at, size_t size) {
  size_t prefixes = 0;
  while (prefixes < size && prefixes < 14 && (at[prefixes] == 0x66 || at[prefixes] == 0x2e))
    ++prefixes;
  const uint8_t* op = at + prefixes;
  const size_t left = size - prefixes;
  if (left >= 1 && (op[0] == 0x90 || (op[0] == 0xcc && prefixes == 0))) return prefixes + 1;
  if (left < 3 || op[0] != 0x0f || op[1] != 0x1f || (op[2] & 0x38) != 0) return 0;
  const uint8_t mod = op[2] >> 6;
  const uint8_t rm = op[2] & 7;
  size_t length = 3 + (mod != 3 && rm == 4 ? 1 : 0);  // SIB byte
  if (mod == 1) length += 1;
  if (mod == 2 || (mod == 0 && rm == 5)) length += 4;
  return length <= left ? prefixes + length : 0;
}

// Whether [from, to) of the section is alignment fill only (padding between functions).
bool is_fill(const CodeSection& section, uint64_t from, uint64_t to) {
  if (section.bytes == nullptr) return false;
  const uint8_t* at = section.bytes + (from - section.coverage.start);
  size_t left = to - from;
  while (left > 0) {
    const size_t length = fill_length(at, left);
    if (length == 0) return false;
    at += length;
    left -= length;
  }
  return true;
}

void count_gap(CodeSection& section, uint64_t from, uint64_t to) {
  if (from >= to) return;
  if (is_fill(section, from, to))
    section.coverage.padding_bytes += to - from;
  else
    section.coverage.uncovered_bytes[static_cast<size_t>(UnwindGap::kNoCfi)] += to - from;
}

}  // namespace

std::optional<std::vector<CodeSection>> executable_sections(Elf* elf) {
  std::vector<CodeSection> sections;
  size_t names = 0;
  if (elf_getshdrstrndx(elf, &names) != 0) return sections;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr || header.sh_type == SHT_NOBITS) continue;
    if ((header.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) != (SHF_ALLOC | SHF_EXECINSTR)) continue;
    if (header.sh_size == 0) continue;
    const uint64_t end = header.sh_addr + header.sh_size;
    if (end > kRowPcLimit || end < header.sh_addr) return std::nullopt;
    const char* name = elf_strptr(elf, names, header.sh_name);
    const Elf_Data* data = elf_getdata(scn, nullptr);
    const bool whole = data != nullptr && data->d_buf != nullptr && data->d_size == header.sh_size;
    sections.push_back({{name != nullptr ? name : "?", header.sh_addr, end},
                        whole ? static_cast<const uint8_t*>(data->d_buf) : nullptr});
  }
  return sections;
}

// Stretches beyond kLongestInferred (a file without CFI) are left alone: that is not the code
// this is for, and it would slow the table's build.
void add_inferred_spans(const std::vector<CodeSection>& sections, std::vector<UnwindSpan>& spans,
                        UnwindBudget& budget) {
  constexpr uint64_t kLongestInferred = 64 * 1024;
  const IsFunctionEntry is_function_entry = [&spans](uint64_t address) {
    auto it = std::upper_bound(spans.begin(), spans.end(), address,
                               [](uint64_t value, const UnwindSpan& s) { return value < s.start; });
    if (it == spans.begin() || (--it)->end <= address) return false;
    return it->row.cfa_rule == BPFPROF_CFA_PLT ||
           (it->row.cfa_rule == BPFPROF_CFA_RSP && it->row.cfa_offset == 8 &&
            it->row.rbp_rule == BPFPROF_RBP_SAME);
  };
  std::vector<UnwindSpan> inferred;
  std::optional<StackHeightReader> reader;  // opened at the first gap that is not fill
  auto infer = [&](const CodeSection& section, uint64_t from, uint64_t to) {
    if (from >= to || to - from > kLongestInferred || budget.spent(spans.size() + inferred.size()))
      return;
    if (is_fill(section, from, to)) return;
    const uint8_t* code = section.bytes + (from - section.coverage.start);
    if (!reader) reader.emplace();
    for (const InferredSpan& s : reader->infer(from, code, to - from, is_function_entry)) {
      UnwindSpan span{s.start, s.end, {}, UnwindGap::kNoCfi};
      span.row.cfa_rule = BPFPROF_CFA_RSP;
      span.row.cfa_offset = static_cast<int32_t>(s.cfa_offset);
      span.row.rbp_rule = s.rbp == InferredRbp::kSame    ? BPFPROF_RBP_SAME
                          : s.rbp == InferredRbp::kSaved ? BPFPROF_RBP_AT_CFA
                                                         : BPFPROF_RBP_UNKNOWN;
      span.row.rbp_offset = s.rbp_offset;
      span.row.rbx_rule = BPFPROF_RBP_UNKNOWN;  // not followed by the reading
      inferred.push_back(span);
    }
  };
  for (const CodeSection& section : sections) {
    if (section.bytes == nullptr) continue;
    const uint64_t start = section.coverage.start;
    const uint64_t end = section.coverage.end;
    if (budget.spent(spans.size() + inferred.size())) return;
    uint64_t done = start;
    // Spans are sorted and do not overlap (normalize_spans): the first one ending after the start.
    auto it = std::upper_bound(spans.begin(), spans.end(), start,
                               [](uint64_t value, const UnwindSpan& s) { return value < s.end; });
    for (; it != spans.end() && it->start < end; ++it) {
      infer(section, done, std::max(done, it->start));
      done = std::max(done, std::min(it->end, end));
    }
    infer(section, done, end);
  }
  if (inferred.empty() || budget.spent(spans.size() + inferred.size())) return;
  merge_spans(spans, std::move(inferred));
}

void measure_coverage(CodeSection& code, const std::vector<UnwindSpan>& spans,
                      UnwindBudget& budget) {
  SectionCoverage& section = code.coverage;
  auto it = std::upper_bound(spans.begin(), spans.end(), section.start,
                             [](uint64_t value, const UnwindSpan& s) { return value < s.start; });
  if (it != spans.begin()) --it;
  uint64_t done = section.start;  // counted up to here
  for (; it != spans.end() && it->start < section.end; ++it) {
    if (budget.spent()) return;
    const uint64_t from = std::max(it->start, section.start);
    const uint64_t to = std::min(it->end, section.end);
    if (from >= to) continue;
    count_gap(code, done, from);
    done = to;
    if (!is_usable(it->row)) {
      section.uncovered_bytes[static_cast<size_t>(it->gap)] += to - from;
      continue;
    }
    section.covered_bytes += to - from;
    const bool walks_on =
        it->row.cfa_rule != BPFPROF_CFA_ROOT && it->row.cfa_rule != BPFPROF_CFA_SIGNAL;
    if (walks_on && it->row.rbp_rule == BPFPROF_RBP_UNKNOWN) section.rbp_unknown_bytes += to - from;
  }
  count_gap(code, done, section.end);
}

}  // namespace bpfprof
