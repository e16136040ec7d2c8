#include "userspace/session/signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace bpfprof {

namespace {

// Lock-free atomics: safe in a signal handler, and two signals handled at once on two
// threads both count.
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);
std::atomic<int> g_signal_count{0};
std::atomic<int> g_last_signal{0};
std::atomic<bool> g_signal_from_process{false};

// Set while the profile is written. The path is complete before g_writing is set (release),
// and read only after the handler sees it set (acquire).
std::atomic<bool> g_writing{false};
char g_writing_temp_path[4096];

void write_stderr(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
  (void)ignored;
}

void on_stop_signal(int sig, siginfo_t* info, void*) {
  g_last_signal = sig;
  g_signal_from_process = info && info->si_code <= 0;  // SI_USER, SI_QUEUE, SI_TKILL
  const int count = g_signal_count.fetch_add(1) + 1;
  if (!g_writing.load(std::memory_order_acquire)) return;
  if (count < 3) {
    write_stderr("\nbpfprof: still writing the profile; a third Ctrl-C aborts without it\n");
    return;
  }
  if (g_writing_temp_path[0]) unlink(g_writing_temp_path);
  write_stderr("\nbpfprof: aborted; no profile written\n");
  _exit(128 + sig);
}

std::atomic<int> g_dump_requests{0};

void on_dump_signal(int) { g_dump_requests.fetch_add(1); }

}  // namespace

void install_dump_signal_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_dump_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, nullptr);
}

bool take_dump_request() { return g_dump_requests.exchange(0) > 0; }

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_sigaction = on_stop_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(sig, &sa, nullptr);
}

StopSignals stop_signals() {
  return StopSignals{g_signal_count.load(), g_last_signal.load(), g_signal_from_process.load()};
}

WritingProfile::WritingProfile(const std::string& temp_path) { now_writing(temp_path); }

void WritingProfile::now_writing(const std::string& temp_path) {
  // Unpublished while the path changes: the handler never reads half of one.
  g_writing.store(false, std::memory_order_release);
  snprintf(g_writing_temp_path, sizeof g_writing_temp_path, "%s", temp_path.c_str());
  g_writing.store(true, std::memory_order_release);
}

WritingProfile::~WritingProfile() { g_writing.store(false, std::memory_order_release); }

}  // namespace bpfprof
