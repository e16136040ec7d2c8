// bpfprof: a sampling profiler for Linux that writes Firefox Profiler profiles.
#include <malloc.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "bpf/events.h"
#include "userspace/session/recorder.h"
#include "userspace/session/replay.h"
#include "userspace/session/serve.h"

namespace {

// The SIZE part of dwarf[,SIZE] and dwarf-copy[,SIZE] (empty without one); nullopt for any
// other mode.
std::optional<std::string_view> dwarf_copy_size(std::string_view call_graph) {
  for (std::string_view mode : {"dwarf-copy", "dwarf"}) {
    if (!call_graph.starts_with(mode)) continue;
    std::string_view rest = call_graph.substr(mode.size());
    if (rest.empty()) return rest;
    if (rest[0] == ',') return rest.substr(1);
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  // Sample tables grow to hundreds of MB: keep freed memory for reuse instead of mapping
  // and faulting in fresh pages at each growth (a fifth of the CPU time on a VM).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 16 << 20);
  CLI::App app{
      "bpfprof: sample what processes are doing (kernel and user stacks) and write a "
      "Firefox Profiler profile"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("bpfprof ") + BPFPROF_VERSION);
  app.footer(
      "Examples (as root):\n"
      "  bpfprof record -- make -j2                 profile a command and all its children\n"
      "  bpfprof record -p 1234,5678                attach to running processes (Ctrl-C to stop)\n"
      "  bpfprof record -a -d 10                    the whole system for 10 seconds\n"
      "  bpfprof record -o out.json.gz -F 4000 -- ./myprog\n"
      "Then open the .json.gz at https://profiler.firefox.com (Load a profile from file).");
  bpfprof::RecordOptions options;

  CLI::App* record = app.add_subcommand(
      "record",
      "Record a profile: of a command and its children (-- CMD), of running processes (-p), or of "
      "the whole system (-a)");
  record->add_option("-F,--frequency", options.frequency_hz, "Samples per second per CPU")
      ->check(CLI::Range(1u, 100000u))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)  // the last -F wins, as in perf
      ->capture_default_str();
  record
      ->add_option("-o,--output", options.output_path,
                   "Output file (.json.gz, or .json for plain JSON)")
      ->capture_default_str();
  record
      ->add_option("-d,--duration", options.duration_seconds,
                   "Stop recording after SECONDS (a launched command keeps running)")
      ->check(CLI::PositiveNumber);
  record
      ->add_option("-p,--pid", options.attach_pids,
                   "Attach to running processes (comma-separated pids)")
      ->delimiter(',');
  record->add_flag("-a,--all", options.system_wide, "Record every process of the system");
  record->add_flag("--keep-idle-threads", options.keep_idle_threads,
                   "Also write threads that got no sample");
  record
      ->add_option("--symbol-dir", options.symbol_dirs,
                   "Also look for debug files in DIR (DIR/.build-id/xx/rest.debug, "
                   "DIR/<debuglink>); repeatable")
      ->check(CLI::ExistingDirectory)
      ->type_name("DIR");
  std::string call_graph = "dwarf";
  record
      ->add_option("--call-graph", call_graph,
                   "User stacks: fp (frame pointers), dwarf[,SIZE] (walked in the kernel with "
                   "unwind tables from the binaries' CFI; where that cannot finish, SIZE bytes "
                   "of stack copied, default 8192, and unwound in userspace) or "
                   "dwarf-copy[,SIZE] (always copied)")
      ->capture_default_str();
  auto* off_cpu = record->add_flag_callback(
      "--off-cpu", [&] { options.off_cpu = true; },
      "Record where threads wait while off the CPU, and for how long "
      "(default: on for a command and -p, off for -a)");
  record
      ->add_flag_callback(
          "--no-off-cpu", [&] { options.off_cpu = false; }, "Do not record off-CPU time")
      ->excludes(off_cpu);
  record
      ->add_option(
          "--save-events", options.save_events_path,
          "Also save the raw event stream to FILE (for bpfprof replay: benchmarks, debugging)")
      ->type_name("FILE");
  std::map<std::string, bpfprof::OutputFormat> formats{
      {"firefox", bpfprof::OutputFormat::kFirefox},
      {"collapsed", bpfprof::OutputFormat::kCollapsed}};
  record
      ->add_option(
          "--format", options.format,
          "firefox (a Firefox Profiler profile, the default) or collapsed (folded stacks, one "
          "\"process (pid);thread;frame;...;frame COUNT\" line per unique stack, for "
          "flamegraph.pl, inferno "
          "and speedscope; counts in sampling intervals)")
      ->transform(CLI::CheckedTransformer(formats, CLI::ignore_case))
      ->type_name("FORMAT");
  std::string buffer_size;
  record
      ->add_option(
          "--buffer-size", buffer_size,
          "Size of the kernel-to-bpfprof ring buffer, e.g. 64M (a power of two, 64K to 1G; default "
          "16M). Events that find it full are lost, counted and marked in the profile")
      ->type_name("SIZE");
  record->add_flag(
      "--run-as-root", options.run_as_root,
      "Under sudo, run the command as root (by default it runs as the user who ran sudo, and the "
      "profile is theirs)");
  record->add_flag(
      "--no-collapse", options.no_collapse,
      "Write one sample per timer tick (by default consecutive identical samples of a thread are "
      "one sample with a weight)");
  record->add_option("command", options.command, "The command to run, after --");
  record->positionals_at_end();
  record->footer(
      "Examples:\n"
      "  bpfprof record -- ./server --port 8080     a command and its children, until it exits\n"
      "  bpfprof record -d 30 -- ./server           stop after 30 s and leave the command running\n"
      "  bpfprof record -p 1234                     a running process, until Ctrl-C or its exit\n"
      "  bpfprof record -a -d 10 -o system.json.gz  every process of the machine for 10 s\n"
      "  bpfprof record --call-graph fp -F 4000 -- ./prog   frame-pointer stacks, 4 kHz");

  bpfprof::ReplayOptions replay_options;
  CLI::App* replay = app.add_subcommand(
      "replay",
      "Turn an event stream saved with record --save-events into a profile again, and report the "
      "speed of each stage (decode, unwind, model, symbolize, write); on the machine that recorded "
      "it");
  replay->add_option("events", replay_options.events_path, "The saved event stream")->required();
  replay->add_option("-o,--output", replay_options.output_path, "Output file")
      ->capture_default_str();
  replay->add_option("--symbol-dir", replay_options.symbol_dirs, "As for record")->type_name("DIR");
  replay->add_flag("--keep-idle-threads", replay_options.keep_idle_threads, "As for record");
  replay->add_flag("--no-collapse", replay_options.no_collapse, "As for record");

  bpfprof::ServeOptions serve_options;
  CLI::App* serve = app.add_subcommand("serve",
                                       "Serve a profile on 127.0.0.1 for the Firefox Profiler and "
                                       "print (and open) its from-url link");
  serve->add_option("file", serve_options.path, "The profile (.json.gz or .json)")->required();
  serve->add_option("--port", serve_options.port, "Port on 127.0.0.1 (default: any free one)");
  serve->add_flag_callback(
      "--no-browser", [&] { serve_options.open_browser = false; }, "Only print the link");
  record->add_flag(
      "--open", options.open,
      "After recording, serve the profile like bpfprof serve (until Ctrl-C) and open its link");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    fprintf(stderr, "bpfprof: %s (see bpfprof %s --help)\n", e.what(),
            app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name().c_str());
    return 2;
  }
  if (replay->parsed()) return bpfprof::run_replay(replay_options);
  if (serve->parsed()) return bpfprof::run_serve(serve_options);
  if (options.format == bpfprof::OutputFormat::kCollapsed && record->count("--output") == 0)
    options.output_path = "profile.folded";
  if (!buffer_size.empty()) {
    char* end = nullptr;
    unsigned long long size = strtoull(buffer_size.c_str(), &end, 10);
    if (*end == 'K' || *end == 'k')
      size <<= 10, ++end;
    else if (*end == 'M' || *end == 'm')
      size <<= 20, ++end;
    else if (*end == 'G' || *end == 'g')
      size <<= 30, ++end;
    if (*end != '\0' || size < (64 << 10) || size > (1ull << 30) || (size & (size - 1)) != 0) {
      fprintf(stderr,
              "bpfprof: --buffer-size must be a power of two from 64K to 1G (e.g. 64M), not %s\n",
              buffer_size.c_str());
      return 2;
    }
    options.ring_buffer_bytes = static_cast<uint32_t>(size);
  }
  if (call_graph == "fp") {
    options.user_stack_copy_bytes = 0;
  } else if (const std::optional<std::string_view> size = dwarf_copy_size(call_graph)) {
    options.user_stack_copy_bytes = 8192;
    // Plain dwarf walks stacks in the kernel first; dwarf-copy always copies them.
    options.walk_stacks_in_kernel = !call_graph.starts_with("dwarf-copy");
    if (!size->empty()) {
      const std::string text(*size);
      char* end = nullptr;
      unsigned long bytes = strtoul(text.c_str(), &end, 0);
      if (*end != '\0' || bytes < 64 || bytes > BPFPROF_MAX_STACK_COPY) {
        fprintf(stderr, "bpfprof: --call-graph dwarf,SIZE: SIZE must be 64 to %d bytes\n",
                BPFPROF_MAX_STACK_COPY);
        return 2;
      }
      options.user_stack_copy_bytes = static_cast<uint32_t>(bytes) & ~7u;
      options.fixed_stack_copy_size = true;
    }
  } else {
    fprintf(stderr, "bpfprof: --call-graph must be fp or dwarf[,SIZE] (or dwarf-copy[,SIZE])\n");
    return 2;
  }
  return bpfprof::run_record(options);
}
