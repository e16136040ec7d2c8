// Goroutine label sets: the frame name that carries them (userspace/model/label_set.h), the
// events the BPF reader sends (runtimes/golabels/runtime.h) put at the root of their stack,
// and where a Go binary keeps them (symbols/go/labels_layout.h's labels_site).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <dwarf.h>
#include <elfutils/libdw.h>

#include "runtimes/golabels/processes.h"
#include "runtimes/golabels/runtime.h"
#include "tests/unit/test_helpers.h"
#include "userspace/model/label_set.h"

namespace bpfprof {
namespace {

using testing_helpers::go_fixture;

TEST(LabelSet, TheFrameNameReadsAsTheSetAndGivesItBack) {
  const LabelSet labels = {{"endpoint", "/api/v1"}, {"tenant", "acme"}};
  EXPECT_EQ(label_frame_name(labels), "[labels] endpoint=/api/v1, tenant=acme");
  EXPECT_EQ(parse_label_frame_name(label_frame_name(labels)), labels);
  EXPECT_EQ(label_frame_name({}), "[labels]");
  EXPECT_EQ(parse_label_frame_name("[labels]"), LabelSet{});
}

TEST(LabelSet, SeparatorsInKeysAndValuesAreEscaped) {
  const LabelSet labels = {{"q=1, r", "a\\b,c=d"}, {"", ""}};
  const std::string name = label_frame_name(labels);
  EXPECT_EQ(name, "[labels] q\\=1\\, r=a\\\\b\\,c\\=d, =");
  EXPECT_EQ(parse_label_frame_name(name), labels);
}

TEST(LabelSet, OtherNamesAreNotLabelSets) {
  for (const char* name : {"main.main", "[labels", "[labels] k", "[labels] k=v,x=y",
                           "[labels] k=v=w", "[labels] k=v\\", "[labels] k=\\q", "[labels] "})
    EXPECT_FALSE(parse_label_frame_name(name)) << name;
}

bpfprof_golabels_stack_event event_with(
    Pid pid, Tid tid, uint64_t time, uint64_t set, uint32_t status,
    const std::vector<std::pair<std::string, std::string>>& pairs) {
  bpfprof_golabels_stack_event e{};
  e.header.kind = BPFPROF_EVENT_GOLABELS_STACK;
  e.header.pid = static_cast<uint32_t>(pid.value);
  e.header.tid = static_cast<uint32_t>(tid.value);
  e.header.timestamp_ns = time;
  e.set = set;
  e.status = status;
  for (const auto& [key, value] : pairs) {
    bpfprof_go_label& l = e.frames[e.count++];
    l.key_length = static_cast<uint32_t>(key.size());
    l.value_length = static_cast<uint32_t>(value.size());
    memcpy(l.key, key.data(), std::min(key.size(), sizeof(l.key)));
    memcpy(l.value, value.data(), std::min(value.size(), sizeof(l.value)));
  }
  return e;
}

// The event's pairs, sorted by key, each cut where the event's bounds cut it, and marked.
TEST(GoLabelsRuntime, AnEventsPairsSortedAndMarkedWhereCut) {
  const std::string long_value(300, 'v');
  const auto e = event_with(Pid{1}, Tid{1}, 1, 0x10, BPFPROF_GO_LABELS_READ,
                            {{"work", "hash"}, {"fixture", long_value}});
  const LabelSet labels = label_set_of(e, e.count);
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(labels[0].first, "fixture");
  EXPECT_EQ(labels[0].second, std::string(BPFPROF_GO_LABEL_VALUE_BYTES, 'v') + "\u2026");
  EXPECT_EQ(labels[1], (std::pair<std::string, std::string>{"work", "hash"}));
}

std::string root_name(const std::vector<uint64_t>& user, const Recording& recording) {
  const std::optional<RuntimeFrameId> id = runtime_frame_of(user.back());
  return id ? recording.runtime_frames.function_of(*id).qualified_name : "";
}

// Process `pid` runs go_cpu, a Go program that labels its goroutines.
void runs_go_cpu(Runtime& runtime, Pid pid, Recording& recording) {
  MappingInfo text;
  text.start = 0x400000;
  text.length = 0x100000;
  text.path = go_fixture("go_cpu");
  const std::vector<LifecycleEvent> events = {
      LifecycleEvent{MonotonicNs{1}, ProcessStartEvent{pid, "go_cpu", false}},
      LifecycleEvent{MonotonicNs{2}, MmapEvent{pid, Tid{pid.value}, text}}};
  runtime.observe(events, 0, recording);
}

// A sample's label set is its stack's outermost frame; a set sent by its address alone is the
// one sent whole before; an unreadable set gives none.
TEST(GoLabelsRuntime, TheSetGoesAtTheRootOfItsSample) {
  Recording recording;
  std::unique_ptr<Runtime> runtime = make_golabels_runtime();
  runs_go_cpu(*runtime, Pid{7}, recording);
  auto take = [&](const bpfprof_golabels_stack_event& e) {
    runtime->take_event(
        &e, offsetof(bpfprof_golabels_stack_event, frames) + e.count * sizeof(bpfprof_go_label),
        recording);
  };
  take(event_with(Pid{7}, Tid{8}, 100, 0xc000, BPFPROF_GO_LABELS_READ, {{"work", "sort"}}));
  std::vector<uint64_t> user = {0x401000, 0x402000};
  runtime->merge_into(Pid{7}, Tid{8}, MonotonicNs{100}, user, recording);
  ASSERT_EQ(user.size(), 3u);
  EXPECT_EQ(root_name(user, recording), "[labels] work=sort");

  take(event_with(Pid{7}, Tid{9}, 200, 0xc000, BPFPROF_GO_LABELS_KNOWN, {}));
  user = {0x401000};
  runtime->merge_into(Pid{7}, Tid{9}, MonotonicNs{200}, user, recording);
  ASSERT_EQ(user.size(), 2u);
  EXPECT_EQ(root_name(user, recording), "[labels] work=sort");

  take(event_with(Pid{7}, Tid{9}, 300, 0xd000, BPFPROF_GO_LABELS_UNREADABLE, {}));
  user = {0x401000};
  runtime->merge_into(Pid{7}, Tid{9}, MonotonicNs{300}, user, recording);
  EXPECT_EQ(user.size(), 1u);
  // Sent for another stack (time): not this one's.
  take(event_with(Pid{7}, Tid{9}, 400, 0xc000, BPFPROF_GO_LABELS_KNOWN, {}));
  runtime->merge_into(Pid{7}, Tid{9}, MonotonicNs{401}, user, recording);
  EXPECT_EQ(user.size(), 1u);
  const RuntimeStats& stats = recording.stats.runtimes[RuntimeKind::kGoLabels];
  EXPECT_EQ(stats.stacks, 4u);
  EXPECT_EQ(stats.merged, 2u);
  EXPECT_EQ(stats.unreadable, 1u);
  // Another process's events (not a Go program found labelling) give nothing.
  take(event_with(Pid{70}, Tid{70}, 500, 0xc000, BPFPROF_GO_LABELS_READ, {{"k", "v"}}));
  user = {0x401000};
  runtime->merge_into(Pid{70}, Tid{70}, MonotonicNs{500}, user, recording);
  EXPECT_EQ(user.size(), 1u);
}

TEST(GoLabelsRuntime, AShortEventIsIgnored) {
  Recording recording;
  std::unique_ptr<Runtime> runtime = make_golabels_runtime();
  runs_go_cpu(*runtime, Pid{7}, recording);
  const auto e = event_with(Pid{7}, Tid{8}, 100, 0xc000, BPFPROF_GO_LABELS_READ, {{"k", "v"}});
  runtime->take_event(&e, offsetof(bpfprof_golabels_stack_event, frames) - 1, recording);
  std::vector<uint64_t> user = {0x401000};
  runtime->merge_into(Pid{7}, Tid{8}, MonotonicNs{100}, user, recording);
  EXPECT_EQ(user.size(), 1u);
}

// go_cpu (Go 1.19, no cgo) labels its goroutines: g at fs - 8 (runtime.tlsg), m.curg at 192
// and g.labels at 360 (its DWARF's runtime.m and runtime.g), a map.
TEST(GoLabelsProcesses, TheFixturesSite) {
  for (const char* name : {"go_cpu", "go_cpu_stripped", "go_cpu_pie"}) {
    const GoLabelsBinary binary = inspect_go_labels_binary(go_fixture(name));
    ASSERT_TRUE(binary.site) << name << ": " << binary.rejection;
    const bpfprof_go_labels_process entry = go_labels_entry(*binary.site);
    EXPECT_EQ(entry.g_slot, -8) << name;
    EXPECT_EQ(entry.m_curg, 192u) << name;
    EXPECT_EQ(entry.g_labels, 360u) << name;
    EXPECT_EQ(entry.form, BPFPROF_GO_LABELS_MAP) << name;
  }
  // A Go program that sets no labels has nothing, and says nothing.
  const GoLabelsBinary block = inspect_go_labels_binary(go_fixture("go_block"));
  EXPECT_FALSE(block.site);
  EXPECT_TRUE(block.rejection.empty());
  EXPECT_FALSE(inspect_go_labels_binary("/bin/true").site);
}

// The offset of `member` in the structure type `type` as the binary's DWARF says (Go's linker
// writes runtime.g and runtime.m into an unstripped build's DWARF).
std::optional<uint64_t> dwarf_member_offset(const std::string& path, const char* type,
                                            const char* member) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  Dwarf* dwarf = dwarf_begin(fd, DWARF_C_READ);
  std::optional<uint64_t> offset;
  Dwarf_Off cu = 0, next = 0;
  size_t header_size = 0;
  while (dwarf && !offset &&
         dwarf_nextcu(dwarf, cu, &next, &header_size, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die unit, die;
    if (dwarf_offdie(dwarf, cu + header_size, &unit) && dwarf_child(&unit, &die) == 0) {
      do {
        const char* name = dwarf_diename(&die);
        if (dwarf_tag(&die) != DW_TAG_structure_type || !name || strcmp(name, type) != 0) continue;
        Dwarf_Die field;
        if (dwarf_child(&die, &field) != 0) continue;
        do {
          const char* field_name = dwarf_diename(&field);
          Dwarf_Attribute at;
          Dwarf_Word value = 0;
          if (field_name && strcmp(field_name, member) == 0 &&
              dwarf_attr(&field, DW_AT_data_member_location, &at) &&
              dwarf_formudata(&at, &value) == 0)
            offset = value;
        } while (!offset && dwarf_siblingof(&field, &field) == 0);
      } while (!offset && dwarf_siblingof(&die, &die) == 0);
    }
    cu = next;
  }
  if (dwarf) dwarf_end(dwarf);
  close(fd);
  return offset;
}

// go_cpu built by a current Go release (go1.26): its site is where its DWARF says, and its
// labels are in Go 1.24's sorted slice.
TEST(GoLabelsProcesses, ACurrentGosSiteIsWhereItsDwarfSays) {
  const std::string path = go_fixture("go_cpu_current");
  if (!std::filesystem::exists(path)) {
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") FAIL() << path << " was not built";
    GTEST_SKIP() << "no current Go toolchain (scripts/go-current.sh)";
  }
  const GoLabelsBinary binary = inspect_go_labels_binary(path);
  ASSERT_TRUE(binary.site) << binary.rejection;
  const bpfprof_go_labels_process entry = go_labels_entry(*binary.site);
  EXPECT_EQ(entry.g_slot, -8);
  EXPECT_EQ(entry.form, BPFPROF_GO_LABELS_SLICE);
  EXPECT_EQ(std::optional<uint64_t>(entry.g_labels),
            dwarf_member_offset(path, "runtime.g", "labels"));
  EXPECT_EQ(std::optional<uint64_t>(entry.m_curg), dwarf_member_offset(path, "runtime.m", "curg"));
  // The same offsets for go_cpu's Go 1.19, checked against its own DWARF.
  EXPECT_EQ(dwarf_member_offset(go_fixture("go_cpu"), "runtime.g", "labels"), 360u);
  EXPECT_EQ(dwarf_member_offset(go_fixture("go_cpu"), "runtime.m", "curg"), 192u);
}

}  // namespace
}  // namespace bpfprof
