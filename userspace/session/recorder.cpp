#include "userspace/session/recorder.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <new>
#include <system_error>

#include "userspace/model/clocks.h"
#include "userspace/output/profile_writer.h"
#include "userspace/session/cgroup_targets.h"
#include "userspace/session/collect_loop.h"
#include "userspace/session/launcher.h"
#include "userspace/session/output_writer.h"
#include "userspace/session/periodic_driver.h"
#include "userspace/session/preflight.h"
#include "userspace/session/record_targets.h"
#include "userspace/session/serve.h"
#include "userspace/session/signals.h"

namespace bpfprof {

namespace {

// One line for an exception: what it says, and for a lack of memory (an allocation, a thread
// that could not get its stack) that a memory limit may be the cause.
std::string describe_failure(const std::exception& e) {
  bool memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
  if (const auto* system = dynamic_cast<const std::system_error*>(&e))
    memory = system->code().value() == ENOMEM || system->code().value() == EAGAIN;
  if (!memory) return e.what();
  const std::string detail =
      dynamic_cast<const std::bad_alloc*>(&e) ? "" : e.what() + std::string("; ");
  return "out of memory (" + detail +
         "is a memory limit, ulimit -v or a cgroup's, below what bpfprof needs?)";
}

std::string human_size(uint64_t bytes) {
  char text[32];
  if (bytes >= 10 << 20)
    snprintf(text, sizeof text, "%.0f MB", static_cast<double>(bytes) / (1 << 20));
  else if (bytes >= 1 << 20)
    snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / (1 << 20));
  else
    snprintf(text, sizeof text, "%.0f KB", static_cast<double>(bytes) / 1024);
  return text;
}

// Attaching holds one fd per mapped file, and there is one perf fd per CPU and event.
void raise_file_limit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

void print_written_file(const std::string& path, OutputFormat format) {
  struct stat written {};
  stat(path.c_str(), &written);
  // A device or a pipe (-o /dev/stdout) has no size to show.
  const std::string size = S_ISREG(written.st_mode)
                               ? " (" + human_size(static_cast<uint64_t>(written.st_size)) + ")"
                               : "";
  fprintf(stderr, "bpfprof: wrote %s%s — %s\n", path.c_str(), size.c_str(),
          format == OutputFormat::kCollapsed
              ? "folded stacks for flamegraph.pl, inferno-flamegraph or speedscope"
          : format == OutputFormat::kPprof
              ? "pprof: go tool pprof, Pyroscope, Parca"
              : "open it at https://profiler.firefox.com (Load a profile from file)");
}

// Checks the options and the machine before anything starts.
void check_record_options(const RecordOptions& options) {
  const bool launch = !options.command.empty();
  const int modes = (launch ? 1 : 0) + (options.attach_pids.empty() ? 0 : 1) +
                    (options.system_wide ? 1 : 0) + (options.cgroup_paths.empty() ? 0 : 1);
  if (modes != 1) throw RecordFailure(2, "give exactly one of -- CMD, -p PID, -a or --cgroup PATH");
  if (options.cgroup_paths.size() > BPFPROF_MAX_CGROUP_FILTERS)
    throw RecordFailure(
        2, "at most " + std::to_string(BPFPROF_MAX_CGROUP_FILTERS) + " --cgroup paths");
  if (std::optional<std::string> problem = check_environment(current_environment()))
    throw RecordFailure(2, *problem);
  if (launch && !find_executable(options.command[0]))
    throw RecordFailure(127, options.command[0] + ": command not found");
  if (std::optional<std::string> error = check_attach_targets(options.attach_pids))
    throw RecordFailure(2, *error);
  try {
    for (const std::string& path : options.cgroup_paths) resolve_cgroup(path);
  } catch (const std::runtime_error& e) {
    throw RecordFailure(2, e.what());
  }
}

// Everything before time zero: the options checked, the command forked, the output opened
// (an unwritable directory fails now), BPF loaded and sampling on.
std::optional<RunAsUser> set_up(const RecordOptions& options, CollectLoop& loop,
                                std::optional<OutputWriter>& output) {
  // Always, and first: without --flight-recorder a SIGUSR2 would otherwise end bpfprof (its
  // default action), during the set-up (the verifier's) as well as later.
  install_dump_signal_handler();
  raise_file_limit();
  check_record_options(options);
  try {
    std::optional<RunAsUser> invoking_user = sudo_invoking_user();
    loop.fork_command(invoking_user);
    output.emplace(options.output_path, invoking_user);
    loop.start_sampling();
    return invoking_user;
  } catch (const RecordFailure&) {
    throw;
  } catch (const std::exception& e) {
    throw RecordFailure(2, describe_failure(e));
  }
}

void print_summary(const RecordOptions& options, const RunReportPrinter& print_report,
                   const CollectLoop& loop, const OutputWriter::Written& written) {
  const double own_cpu_writing_ms = process_cpu_ms() - loop.figures().own_cpu_while_recording_ms -
                                    loop.figures().own_cpu_at_start_ms;
  if (options.verbose) {
    const CollectFigures& f = loop.figures();
    const Recording& r = loop.recording();
    fprintf(
        stderr,
        "bpfprof: start-up: sampling after %.0f ms, targets known after %.0f ms, first sample "
        "after %.0f ms; profile written %.0f ms after the end\n",
        ms_between(f.invoked, f.sampling_started), ms_between(f.invoked, f.targets_known),
        r.stats.first_sample_time.value ? ms_between(f.invoked, r.stats.first_sample_time) : 0.0,
        ms_between(r.end_time, monotonic_now()));
    std::string walkers;
    for (const auto& [program, ms] : f.bpf_load.walker_ms)
      walkers += (walkers.empty() ? "" : ", ") + program + " " + std::to_string(lround(ms));
    const std::string full = f.bpf_load.full_walkers_ms > 0
                                 ? "; with the runtimes' readers after " +
                                       std::to_string(lround(f.bpf_load.full_walkers_ms)) + " ms"
                                 : "";
    fprintf(stderr,
            "bpfprof: BPF load: minimal BTF %.0f ms, main object %.0f ms, walker programs %.0f "
            "ms (%s)%s\n",
            f.bpf_load.core_btf_ms, f.bpf_load.main_object_ms, f.bpf_load.walkers_ms,
            walkers.c_str(), full.c_str());
    fprintf(
        stderr,
        "bpfprof: its own CPU time: %.0f ms while recording (%.2f%% of one CPU), %.0f ms "
        "writing the profile\n",
        f.own_cpu_while_recording_ms,
        100.0 * f.own_cpu_while_recording_ms / std::max(1.0, ms_between(r.start_time, r.end_time)),
        own_cpu_writing_ms);
  }
  print_report(written.report);
  print_written_file(written.path, options.format);
}

// The profile written (elsewhere when its place fails), the last upload, the summary; the
// exit status of `record`.
int finish(const RecordOptions& options, const RunReportPrinter& print_report, CollectLoop& loop,
           OutputWriter& output, PeriodicOutputDriver& periodic) {
  Recording& recording = loop.recording();
  std::optional<OutputWriter::Written> written;
  {
    // From here on a stop signal does not lose what was recorded (a third one does). Said
    // only now: a signal sent on seeing the line must find the writing phase begun.
    WritingProfile writing(output.temp_path());
    fprintf(stderr, "bpfprof: recording ended after %.1f s; writing the profile\n",
            static_cast<double>(recording.end_time.value - recording.start_time.value) / 1e9);
    periodic.write_waiting_periods();
    loop.pipeline().finish(recording.end_time);
    const std::optional<MonotonicNs> from = periodic.last_period(output);
    writing.now_writing(output.temp_path());
    written = output.write(
        [&](OutputSink& sink) {
          std::optional<PeriodWindow> window;  // --switch-output, --flight-recorder
          if (from) window.emplace(recording, *from, recording.end_time);
          return write_profile_with_report(
              loop.pipeline().model(), recording, sink,
              ProfileOptions{options.keep_idle_threads, options.symbol_dirs, options.format,
                             options.embed_sources});
        },
        writing);
    if (!written) return loop.failed_status();
  }
  output.give_to_invoking_user(written->path);
  if (written->path == output.path()) periodic.last_profile_written(written->path);
  periodic.finish_uploads();
  print_summary(options, print_report, loop, *written);
  if (written->path != output.path()) return loop.failed_status();
  if (options.open && options.format == OutputFormat::kFirefox)
    run_serve(ServeOptions{output.path(), 0, true, options.symbol_dirs});
  return loop.exit_status();
}

int record(const RecordOptions& options, const RunReportPrinter& print_report) {
  CollectLoop loop(options, monotonic_now());
  std::optional<OutputWriter> output;
  const std::optional<RunAsUser> invoking_user = set_up(options, loop, output);
  PeriodicOutputDriver periodic(options, loop.pipeline(), loop.recording(), invoking_user);
  loop.start_clock();
  periodic.begin(loop.recording().start_time);
  loop.start_targets();
  loop.collect(periodic);
  return finish(options, print_report, loop, *output, periodic);
}

}  // namespace

int run_record(const RecordOptions& options, const RunReportPrinter& print_report) {
  try {
    return record(options, print_report);
  } catch (const RecordFailure& failure) {
    fprintf(stderr, "bpfprof: %s\n", failure.what());
    return failure.status;
  } catch (const std::exception& e) {
    // Out of memory (or any failure) past the set-up: one line and a status, not an abort.
    fprintf(stderr, "bpfprof: %s\n", describe_failure(e).c_str());
    return 1;
  }
}

}  // namespace bpfprof
