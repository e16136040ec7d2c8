#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "userspace/capture/event_log.h"

namespace bpfprof {
namespace {

std::string temp_path(const char* name) {
  return std::string(testing::TempDir()) + "/" + name + "." + std::to_string(getpid());
}

template <typename T>
T round_trip(const T& payload) {
  LifecycleEvent in{MonotonicNs{123456789}, payload};
  std::vector<uint8_t> bytes = encode_lifecycle_event(in);
  LifecycleEvent out = decode_lifecycle_event(bytes.data(), bytes.size());
  EXPECT_EQ(out.time, in.time);
  EXPECT_TRUE(std::holds_alternative<T>(out.payload));
  return std::get<T>(out.payload);
}

TEST(EventLog, EveryLifecycleEventSurvivesEncoding) {
  ForkEvent fork = round_trip(ForkEvent{Pid{1}, Tid{2}, Pid{3}, Tid{4}, "child"});
  EXPECT_EQ(fork.child_tid, Tid{4});
  EXPECT_EQ(fork.child_comm, "child");
  ExecEvent exec = round_trip(ExecEvent{Pid{5}, Tid{6}, Tid{7}, "comm", "/usr/bin/x"});
  EXPECT_EQ(exec.old_tid, Tid{7});
  EXPECT_EQ(exec.filename, "/usr/bin/x");
  ExitEvent exit = round_trip(ExitEvent{Pid{8}, Tid{9}, CpuTimeNs{10}, -11, true, "gone"});
  EXPECT_EQ(exit.cpu_time, CpuTimeNs{10});
  EXPECT_EQ(exit.exit_code, -11);
  EXPECT_TRUE(exit.group_dead);
  EXPECT_EQ(round_trip(CommEvent{Pid{1}, Tid{1}, std::string("n\0ul", 4)}).comm,
            std::string("n\0ul", 4));
  MmapEvent mmap;
  mmap.pid = Pid{12};
  mmap.mapping = MappingInfo{0x1000,      0x2000,
                             0x3000,      8,
                             1,           99,
                             "/lib/x.so", std::string("\x01\x02\0\x03", 4),
                             7,           HeldFile::open("/proc/self/exe")};
  MmapEvent mmap_out = round_trip(mmap);
  EXPECT_EQ(mmap_out.mapping.length, 0x2000u);
  EXPECT_EQ(mmap_out.mapping.inode, 99u);
  EXPECT_EQ(mmap_out.mapping.build_id, mmap.mapping.build_id);
  // This run's file handles are not saved: they mean nothing to a replay.
  EXPECT_FALSE(mmap_out.mapping.held_file);
  EXPECT_EQ(mmap_out.mapping.mount_namespace, 0u);
  EXPECT_EQ(round_trip(AddressSpaceResetEvent{Pid{13}, Tid{14}}).tid, Tid{14});
  EXPECT_TRUE(round_trip(ProcessStartEvent{Pid{15}, "launcher", true}).is_launcher);
  ExistingProcessEvent existing{Pid{16},
                                "name",
                                "/bin/name",
                                {{Tid{16}, "main", CpuTimeNs{5}}, {Tid{17}, "w", CpuTimeNs{6}}}};
  ExistingProcessEvent existing_out = round_trip(existing);
  ASSERT_EQ(existing_out.threads.size(), 2u);
  EXPECT_EQ(existing_out.threads[1].comm, "w");
  EXPECT_EQ(existing_out.threads[1].cpu_time, CpuTimeNs{6});
  ProcessContext pod = context_from_cgroups(
      "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod2c48913c_b29f_11e7_"
      "9350_020968147796.slice/cri-containerd-" +
      std::string(64, 'b') + ".scope\n");
  pod.namespace_pid = 1;
  EXPECT_EQ(round_trip(ProcessContextEvent{Pid{18}, pod}).context, pod);
  EXPECT_EQ(round_trip(ProcessContextEvent{Pid{19}, {}}).context, ProcessContext{});
}

TEST(EventLog, ATruncatedLifecycleRecordIsAnErrorNotACrash) {
  std::vector<uint8_t> bytes = encode_lifecycle_event(
      LifecycleEvent{MonotonicNs{1}, ExecEvent{Pid{1}, Tid{1}, Tid{1}, "c", "/f"}});
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(decode_lifecycle_event(bytes.data(), n), std::runtime_error) << n;
  bytes[8] = 200;  // unknown event type
  EXPECT_THROW(decode_lifecycle_event(bytes.data(), bytes.size()), std::runtime_error);
}

TEST(EventLog, AWrittenLogReadsBackInOrder) {
  const std::string path = temp_path("events");
  const uint8_t raw[] = {1, 2, 3, 4, 5};
  {
    EventLogWriter writer(path, RecordingSettings{997, "cpu-clock", true, CallGraph::kDwarf,
                                                  MonotonicNs{42}, 1.5e12});
    writer.write_bpf_event(raw, sizeof(raw));
    std::vector<LifecycleEvent> events{
        LifecycleEvent{MonotonicNs{1}, CommEvent{Pid{1}, Tid{1}, "a"}},
        LifecycleEvent{MonotonicNs{2}, CommEvent{Pid{1}, Tid{1}, "b"}}};
    writer.write_lifecycle_events(events, 1);  // only from index 1
    writer.finish(RecordingTrailer{MonotonicNs{77}, 3, 4});
  }
  EventLogReader reader(path);
  EXPECT_EQ(reader.settings().frequency_hz, 997u);
  EXPECT_EQ(reader.settings().sampling_event, "cpu-clock");
  EXPECT_TRUE(reader.settings().off_cpu);
  EXPECT_EQ(reader.settings().call_graph, CallGraph::kDwarf);
  EXPECT_EQ(reader.settings().start_time, MonotonicNs{42});
  EXPECT_EQ(reader.settings().start_wall_clock_ms, 1.5e12);
  auto r1 = reader.next();
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->type, EventLogReader::Record::Type::kBpfEvent);
  ASSERT_EQ(r1->size, sizeof(raw));
  EXPECT_EQ(memcmp(r1->data, raw, sizeof(raw)), 0);
  auto r2 = reader.next();
  ASSERT_TRUE(r2 && r2->lifecycle);
  EXPECT_EQ(std::get<CommEvent>(r2->lifecycle->payload).comm, "b");
  auto r3 = reader.next();
  ASSERT_TRUE(r3);
  EXPECT_EQ(r3->type, EventLogReader::Record::Type::kTrailer);
  EXPECT_EQ(r3->trailer.end_time, MonotonicNs{77});
  EXPECT_EQ(r3->trailer.lost_bpf_events, 3u);
  EXPECT_EQ(r3->trailer.lost_sideband_records, 4u);
  EXPECT_FALSE(reader.next());
  std::remove(path.c_str());
}

// The BPF events of a log of another format would be misread: it is refused in one line that
// says so, as is one of a format that does not exist yet.
TEST(EventLog, ALogOfAnotherFormatIsRefusedWithOneLine) {
  const std::string path = temp_path("old");
  {
    EventLogWriter writer(
        path, RecordingSettings{1000, "cpu-clock", true, CallGraph::kDwarf, MonotonicNs{5}, 0});
    writer.finish(RecordingTrailer{MonotonicNs{9}, 0, 0});
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_EQ(bytes.rfind("bpfprof event log 6\n", 0), 0u);
  for (const char* version : {"5", "3", "7"}) {
    bytes[18] = version[0];
    { std::ofstream(path, std::ios::binary) << bytes; }
    try {
      EventLogReader reader(path);
      FAIL() << "read a log of format " << version;
    } catch (const std::runtime_error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(std::string("event log of format ") + version), std::string::npos)
          << message;
      EXPECT_NE(message.find("record it again"), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
  std::remove(path.c_str());
}

TEST(EventLog, NotALogOrCutShortGivesAClearError) {
  const std::string path = temp_path("notlog");
  { std::ofstream(path) << "hello, this is not an event log\n"; }
  try {
    EventLogReader reader(path);
    FAIL() << "accepted a file that is not a log";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a bpfprof event log"), std::string::npos) << e.what();
  }
  { std::ofstream(path).close(); }  // empty
  EXPECT_THROW(EventLogReader{path}, std::runtime_error);
  EXPECT_THROW(EventLogReader{path + ".missing"}, std::runtime_error);

  {
    EventLogWriter writer(path, RecordingSettings{1000, "cpu-clock", false,
                                                  CallGraph::kFramePointers, MonotonicNs{0}, 0});
    const uint8_t raw[64] = {};
    writer.write_bpf_event(raw, sizeof(raw));
    writer.finish(RecordingTrailer{});
  }
  // Cut inside the BPF record: the settings still read, the record is reported corrupt.
  ASSERT_EQ(truncate(path.c_str(), 80), 0);
  EventLogReader reader(path);
  EXPECT_THROW(reader.next(), std::runtime_error);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace bpfprof

namespace bpfprof {
namespace {

// Saved streams hold raw stack bytes (secrets): owner-only whatever the umask; and a full
// disk is reported with its own reason, not a stale errno.
TEST(EventLog, CreatedOwnerOnlyAndAFullDiskIsReported) {
  const std::string path = testing::TempDir() + "/bpfprof-event-log-mode";
  const mode_t old_umask = umask(0);
  {
    EventLogWriter writer(path, RecordingSettings{});
    writer.finish(RecordingTrailer{});
  }
  umask(old_umask);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  unlink(path.c_str());

  EventLogWriter full("/dev/full", RecordingSettings{});
  std::vector<uint8_t> event(4096, 7);
  for (int i = 0; i < 1024; ++i) full.write_bpf_event(event.data(), event.size());
  try {
    full.finish(RecordingTrailer{});
    ADD_FAILURE() << "no error writing to /dev/full";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
  }
}

// In a directory every user may write to, a link at the log's path is not written through:
// root would truncate the file it names.
TEST(EventLogWriter, DoesNotWriteThroughALinkInASharedDirectory) {
  char pattern[] = "/tmp/event-log-link-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  ASSERT_EQ(chmod(dir.c_str(), 01777), 0);
  const std::string victim = dir + "-victim";
  std::ofstream(victim) << "keep me";
  const std::string link = dir + "/events.log";
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  EXPECT_THROW(EventLogWriter(link, RecordingSettings{1000, "cpu-clock", true, CallGraph::kDwarf,
                                                      MonotonicNs{5}, 0}),
               std::runtime_error);
  std::ifstream in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "keep me");
  unlink(link.c_str());
  unlink(victim.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace bpfprof
