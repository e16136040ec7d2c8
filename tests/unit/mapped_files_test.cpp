// MappedFiles pins the files that processes map, without BPF: mappings of this test process.
#include "userspace/capture/mapped_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "symbols/elf/elf_file.h"
#include "symbols/util/proc_maps.h"
#include "symbols/util/untrusted_file.h"

namespace bpfprof {
namespace {

// Opening /proc/PID/map_files/ needs CAP_SYS_ADMIN, which bpfprof (root) has. Without it the
// tests that pin files cannot run; in CI (root) they must.
#define REQUIRE_MAP_FILES()                                                                \
  if (geteuid() != 0) {                                                                    \
    if (getenv("CI") && std::string(getenv("CI")) == "true") FAIL() << "needs root in CI"; \
    GTEST_SKIP() << "opening /proc/PID/map_files needs root";                              \
  }

// This process's executable mappings of files.
std::vector<MapEntry> own_file_mappings() {
  std::vector<MapEntry> maps = read_proc_maps(getpid()).value();
  std::erase_if(maps,
                [](const MapEntry& m) { return !m.executable || m.kind() != MappingKind::kFile; });
  return maps;
}

LifecycleEvent mmap_event_of(Pid pid, const MapEntry& m, bool with_device_and_inode) {
  MmapEvent e;
  e.pid = pid;
  e.tid = Tid{pid.value};
  e.mapping.start = m.start;
  e.mapping.length = m.end - m.start;
  e.mapping.file_offset = m.file_offset;
  e.mapping.path = m.path;
  if (with_device_and_inode) {
    e.mapping.dev_major = m.dev_major, e.mapping.dev_minor = m.dev_minor;
    e.mapping.inode = m.inode;
  }
  return LifecycleEvent{MonotonicNs{1}, std::move(e)};
}

const MappingInfo& mapping_of(const LifecycleEvent& event) {
  return std::get<MmapEvent>(event.payload).mapping;
}

TEST(MappedFiles, AMappingFromASnapshotIsPinnedWithItsBuildId) {
  REQUIRE_MAP_FILES();
  const std::vector<MapEntry> maps = own_file_mappings();
  ASSERT_FALSE(maps.empty());
  std::vector<LifecycleEvent> events;
  for (const MapEntry& m : maps) events.push_back(mmap_event_of(Pid{getpid()}, m, true));
  MappedFiles files;
  files.resolve(events, 0);
  for (const LifecycleEvent& event : events) {
    const MappingInfo& m = mapping_of(event);
    ASSERT_TRUE(m.held_file) << m.path;
    EXPECT_TRUE(m.readable_path().starts_with("/proc/self/fd/")) << m.path;
    // The pinned fd is the very file: same build-id as the path gives now.
    const UniqueFd fd(open(m.path.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid()) << m.path;
    std::vector<uint8_t> expected = read_elf_build_id(fd.get());
    EXPECT_EQ(m.build_id, std::string(expected.begin(), expected.end())) << m.path;
    EXPECT_EQ(m.mount_namespace, 0u);  // our own namespace: the path is valid as it is
  }
  // One fd per file, however many mappings (and processes) it has.
  std::vector<std::string> paths;
  for (const MapEntry& m : maps) paths.push_back(m.path);
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  EXPECT_EQ(files.open_files(), paths.size());
}

TEST(MappedFiles, AnonymousCodeAndVanishedProcessesAreLeftAlone) {
  const std::vector<MapEntry> maps = own_file_mappings();
  ASSERT_FALSE(maps.empty());
  std::vector<LifecycleEvent> events;
  MapEntry memfd = maps[0];
  memfd.path = "/memfd:jit (deleted)";
  events.push_back(mmap_event_of(Pid{getpid()}, memfd, true));
  // No process has this pid (above pid_max): its files cannot be opened.
  events.push_back(mmap_event_of(Pid{1 << 30}, maps[0], true));
  MappedFiles files;
  files.resolve(events, 0);
  EXPECT_FALSE(mapping_of(events[0]).held_file);
  EXPECT_FALSE(mapping_of(events[1]).held_file);
  EXPECT_EQ(files.open_files(), 0u);
}

TEST(MappedFiles, OnlyEventsFromTheGivenIndexOn) {
  REQUIRE_MAP_FILES();
  const std::vector<MapEntry> maps = own_file_mappings();
  std::vector<LifecycleEvent> events{mmap_event_of(Pid{getpid()}, maps[0], true),
                                     mmap_event_of(Pid{getpid()}, maps[0], true)};
  MappedFiles files;
  files.resolve(events, 1);
  EXPECT_FALSE(mapping_of(events[0]).held_file);
  EXPECT_TRUE(mapping_of(events[1]).held_file);
}

// The files outlive MappedFiles: the mapping events (and the model's libraries copied from
// them) keep them open, so their paths never name an fd that another file reused.
TEST(MappedFiles, HeldFilesStayOpenWhileAMappingRefersToThem) {
  REQUIRE_MAP_FILES();
  const std::vector<MapEntry> maps = own_file_mappings();
  ASSERT_FALSE(maps.empty());
  std::vector<LifecycleEvent> events{mmap_event_of(Pid{getpid()}, maps[0], true)};
  {
    MappedFiles files;
    files.resolve(events, 0);
  }
  const MappingInfo& m = mapping_of(events[0]);
  ASSERT_TRUE(m.held_file);
  const int fd = m.held_file->fd();
  const UniqueFd reopened(open(m.readable_path().c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(reopened.valid());
  EXPECT_EQ(read_elf_build_id(reopened.get()), read_elf_build_id(fd));
  events.clear();  // the last reference: the fd closes
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
}

// A child that moves to a mount namespace of its own when told to (as a container's first
// process does after unshare), then waits to be killed.
class ChildThatUnshares {
 public:
  ChildThatUnshares() {
    if (pipe(to_child_) != 0 || pipe(from_child_) != 0) return;
    pid_ = fork();
    if (pid_ != 0) return;
    char c;
    if (read(to_child_[0], &c, 1) != 1 || unshare(CLONE_NEWNS) != 0) _exit(1);
    if (write(from_child_[1], "x", 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  ~ChildThatUnshares() {
    if (pid_ > 0) kill(pid_, SIGKILL), waitpid(pid_, nullptr, 0);
    for (int fd : {to_child_[0], to_child_[1], from_child_[0], from_child_[1]}) close(fd);
  }
  Pid pid() const { return Pid{pid_}; }
  bool unshare_now() {
    char c;
    return write(to_child_[1], "x", 1) == 1 && read(from_child_[0], &c, 1) == 1;
  }

 private:
  pid_t pid_ = -1;
  int to_child_[2] = {-1, -1};
  int from_child_[2] = {-1, -1};
};

// The mount namespace of a pid is looked up again when a fork or an exec gives the pid a new
// process image: the mappings that follow are read through /proc/PID/root then.
TEST(MappedFiles, APidsNamespaceIsLookedUpAgainAfterAForkOrAnExec) {
  REQUIRE_MAP_FILES();
  const std::vector<MapEntry> maps = own_file_mappings();
  ASSERT_FALSE(maps.empty());
  ChildThatUnshares child;  // forked after reading our maps: it maps the same files
  ASSERT_GT(child.pid().value, 0);
  MappedFiles after_fork;
  MappedFiles after_exec;
  std::vector<LifecycleEvent> fork_events{mmap_event_of(child.pid(), maps[0], true)};
  std::vector<LifecycleEvent> exec_events{mmap_event_of(child.pid(), maps[0], true)};
  after_fork.resolve(fork_events, 0);
  after_exec.resolve(exec_events, 0);
  EXPECT_EQ(mapping_of(fork_events[0]).mount_namespace, 0u);  // ours, for now
  ASSERT_TRUE(child.unshare_now());

  const Tid tid{child.pid().value};
  fork_events.push_back(
      {MonotonicNs{2}, ForkEvent{Pid{getpid()}, Tid{gettid()}, child.pid(), tid}});
  fork_events.push_back(mmap_event_of(child.pid(), maps[0], true));
  after_fork.resolve(fork_events, 1);
  exec_events.push_back({MonotonicNs{2}, AddressSpaceResetEvent{child.pid(), tid}});
  exec_events.push_back(mmap_event_of(child.pid(), maps[0], true));
  after_exec.resolve(exec_events, 1);
  const uint64_t child_namespace = mount_namespace_id("/proc/" + std::to_string(child.pid().value));
  ASSERT_NE(child_namespace, mount_namespace_id("/proc/self"));
  for (const auto* events : {&fork_events, &exec_events}) {
    const MappingInfo& m = mapping_of(events->back());
    EXPECT_EQ(m.mount_namespace, child_namespace);
    EXPECT_TRUE(m.held_file) << m.path;  // through /proc/PID/root
  }
}

TEST(HeldFile, ReadablePathPrefersTheVdsoImageThenTheHeldFile) {
  EXPECT_EQ(readable_path("/usr/lib/x.so", nullptr), "/usr/lib/x.so");
  HeldFileRef held = HeldFile::open("/proc/self/exe");
  ASSERT_TRUE(held);
  EXPECT_EQ(readable_path("/usr/lib/x.so", held), "/proc/self/fd/" + std::to_string(held->fd()));
  ASSERT_FALSE(vdso_image_path().empty());
  EXPECT_EQ(readable_path("[vdso]", held), vdso_image_path());
  EXPECT_FALSE(HeldFile::open("/nonexistent/file"));
}

// The vDSO's copy is bpfprof's own and read-only: its unwind table is cached like a library's.
TEST(HeldFile, TheVdsoCopyIsTrustedForTheTableCache) {
  ASSERT_FALSE(vdso_image_path().empty());
  const int fd = ::open(vdso_image_path().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(written_by_us_or_root_only(fd));
  ::close(fd);
}

}  // namespace
}  // namespace bpfprof
