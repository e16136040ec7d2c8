#include "userspace/cli/options.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <tuple>

#include "bpf/events.h"

namespace bpfprof {

namespace {

// Record options given as text and checked after parsing.
struct RecordOptionText {
  std::string call_graph = "dwarf";
  std::string buffer_size;
  std::string switch_output;
  std::string flight_recorder;
};

const char* const kAppFooter =
    "Examples (as root):\n"
    "  bpfprof record -- make -j2                 profile a command and all its children\n"
    "  bpfprof record -p 1234,5678                attach to running processes (Ctrl-C to stop)\n"
    "  bpfprof record -a -d 10                    the whole system for 10 seconds\n"
    "  bpfprof record --cgroup unified/system.slice/nginx.service -d 10\n"
    "                                             one service's or container's processes\n"
    "  bpfprof record -o out.json.gz -F 4000 -- ./myprog\n"
    "Then open the .json.gz at https://profiler.firefox.com (Load a profile from file).";

// The --format names, for record and convert.
const std::map<std::string, OutputFormat> kFormats{{"firefox", OutputFormat::kFirefox},
                                                   {"collapsed", OutputFormat::kCollapsed},
                                                   {"pprof", OutputFormat::kPprof}};

// The default output file of each format.
std::string default_output(OutputFormat format) {
  switch (format) {
    case OutputFormat::kCollapsed:
      return "profile.folded";
    case OutputFormat::kPprof:
      return "profile.pb.gz";
    default:
      return "profile.json.gz";
  }
}

// --memory and --allocations: memory over time, where it grows, what is still held.
void add_record_memory_options(CLI::App* record, RecordOptions& options) {
  record->add_flag_callback(
      "--memory", [&] { options.memory = true; },
      "Record each process's resident memory over time (a memory track per process, from the "
      "kernel's own counters as pages come and go; its peak in the summary), and where it grows "
      "(one in 64 page faults with its stack: the profile's Native Allocations, pprof's "
      "alloc_space), and where the address space grows and shrinks (mmap, munmap, brk, mremap, "
      "one call sampled per MiB changed, with its stack: markers on the thread's track, pprof's "
      "mapped_space). Costs a tracepoint program run per page mapped or freed (0.1 us), a stack "
      "walk per 64 page faults and per sampled call");
  auto* allocations = record->add_flag_callback(
      "--allocations",
      [&] {
        if (!options.allocation_period) options.allocation_period = kDefaultAllocationPeriod;
      },
      "Record the C allocator's calls (malloc, calloc, realloc, memalign, aligned_alloc, "
      "posix_memalign, free; operator new through them) in the processes recorded, one sampled "
      "per 512 KiB allocated on average, with their stacks, and which blocks are still held at "
      "the end (retained memory, leaks: the profile's Native Allocations, pprof's alloc_space "
      "and inuse_space), beside the memory track; with -p and -a too, no restart. Costs a "
      "uprobe trap per call, some 1.5 us: a loop of malloc and free runs about 50 times slower "
      "(heaptrack: 6 times; bench/memory_overhead.sh), a program that allocates little barely "
      "notices");
  record
      ->add_option("--allocation-interval", options.allocation_period,
                   "With --allocations: the mean BYTES allocated between two sampled calls")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40))
      ->type_name("BYTES")
      ->needs(allocations);
}

// What to record, for how long, and where the profile goes.
CLI::App* add_record_command(CLI::App& app, RecordOptions& options, RecordOptionText& text) {
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
                   "Attach to running processes and their children (comma-separated pids)")
      ->delimiter(',');
  record->add_flag("-a,--all", options.system_wide, "Record every process of the system");
  record
      ->add_option("--cgroup", options.cgroup_paths,
                   "Record the processes in this cgroup's subtree, those that start in it later "
                   "too (a path under /sys/fs/cgroup as perf -G takes it, v2 or a v1 "
                   "controller's; repeatable)")
      ->type_name("PATH");
  record->add_flag("--keep-idle-threads", options.keep_idle_threads,
                   "Also write threads that got no sample");
  record->add_flag("--embed-sources", options.embed_sources,
                   "Put the text of the sampled source files (the hottest first, up to 4 MiB) "
                   "into the profile, for the source view without bpfprof serve");
  record->add_flag("!--no-python-frames", options.python_frames,
                   "Leave Python programs (CPython) as native interpreter frames: no Python "
                   "functions, files or lines in their stacks");
  record
      ->add_option("--symbol-dir", options.symbol_dirs,
                   "Also look for debug files in DIR (DIR/.build-id/xx/rest.debug, "
                   "DIR/<debuglink>); repeatable")
      ->check(CLI::ExistingDirectory)
      ->type_name("DIR");
  record
      ->add_option("--call-graph", text.call_graph,
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
  record->add_flag_callback(
      "--no-wakers", [&] { options.wakers = false; },
      "With off-CPU time, do not record who woke each waiting thread");
  add_record_memory_options(record, options);
  record
      ->add_option("--wake-threshold", options.wake_threshold_ms,
                   "Waits at least MS long get a marker naming who woke the thread, with the "
                   "waker's stack (default: one sampling interval)")
      ->check(CLI::Range(0.001, 3600000.0))
      ->type_name("MS");
  record
      ->add_option(
          "--save-events", options.save_events_path,
          "Also save the raw event stream to FILE (for bpfprof replay: benchmarks, debugging)")
      ->type_name("FILE");
  return record;
}

// How stacks are taken and what is written.
void add_record_output_options(CLI::App* record, RecordOptions& options, RecordOptionText& text) {
  record
      ->add_option(
          "--format", options.format,
          "firefox (a Firefox Profiler profile, the default), collapsed (folded stacks, one "
          "\"process (pid);thread;frame;...;frame COUNT\" line per unique stack, for "
          "flamegraph.pl, inferno and speedscope; counts in sampling intervals) or pprof "
          "(google/pprof's profile.proto, gzipped: go tool pprof, Pyroscope, Parca)")
      ->transform(CLI::CheckedTransformer(kFormats, CLI::ignore_case))
      ->type_name("FORMAT");
  record
      ->add_option(
          "--buffer-size", text.buffer_size,
          "Size of the kernel-to-bpfprof ring buffer, e.g. 64M (a power of two, 64K to 1G; default "
          "16M). Events that find it full are lost, counted and marked in the profile")
      ->type_name("SIZE");
  record
      ->add_option("--max-processes", options.max_processes,
                   "The most processes of the command's tree (or -p's) followed at once; children "
                   "started beyond that go unsampled, counted in the summary")
      ->check(CLI::Range(1u, 1u << 22))
      ->capture_default_str();
  record->add_flag(
      "--run-as-root", options.run_as_root,
      "Under sudo, run the command as root (by default it runs as the user who ran sudo, and the "
      "profile is theirs)");
  record->add_flag(
      "--no-collapse", options.no_collapse,
      "Write one sample per timer tick (by default consecutive identical samples of a thread are "
      "one sample with a weight)");
  auto* switch_output =
      record
          ->add_option("--switch-output", text.switch_output,
                       "Write a complete profile every DURATION (e.g. 60s, 5m, 1h) while "
                       "recording, to NAME.YYYYmmddTHHMMSSZ.EXT after -o's NAME.EXT (UTC, the "
                       "period's start); every sample is in exactly one file")
          ->type_name("DURATION");
  record
      ->add_option("--switch-output-files", options.switch_output_files,
                   "With --switch-output, keep only the newest N files")
      ->needs(switch_output)
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  record
      ->add_option("--flight-recorder", text.flight_recorder,
                   "Keep only the last DURATION of samples in memory; write them on SIGUSR2 (to "
                   "NAME.YYYYmmddTHHMMSSZ.EXT) and at the end (to -o)")
      ->excludes(switch_output)
      ->type_name("DURATION");
  record
      ->add_option("--upload", options.upload_url,
                   "Also send each profile written (every --switch-output period, and the last) "
                   "as pprof to a Pyroscope-compatible server, e.g. http://localhost:4040 "
                   "(POST /ingest; retried, never holding up the recording)")
      ->type_name("URL");
  record->add_flag(
      "--open", options.open,
      "After recording, serve the profile like bpfprof serve (until Ctrl-C) and open its link");
  record->add_flag("-v,--verbose", options.verbose,
                   "Print the full summary at the end (start-up, bpfprof's own CPU, unwinding, "
                   "wakers, every note); it is always in the profile's meta.extra");
  record->add_option("command", options.command, "The command to run, after --");
  record->positionals_at_end();
  record->footer(
      "Examples:\n"
      "  bpfprof record -- ./server --port 8080     a command and its children, until it exits\n"
      "  bpfprof record -d 30 -- ./server           stop after 30 s and leave the command running\n"
      "  bpfprof record -p 1234                     a running process, until Ctrl-C or its exit\n"
      "  bpfprof record -a -d 10 -o system.json.gz  every process of the machine for 10 s\n"
      "  bpfprof record --cgroup cpu/docker/ID -d 10  a container's processes, new ones too\n"
      "  bpfprof record --call-graph fp -F 4000 -- ./prog   frame-pointer stacks, 4 kHz");
}

CLI::App* add_replay_command(CLI::App& app, ReplayOptions& replay_options) {
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

  return replay;
}

CLI::App* add_serve_command(CLI::App& app, ServeOptions& serve_options) {
  CLI::App* serve = app.add_subcommand("serve",
                                       "Serve a profile on 127.0.0.1 for the Firefox Profiler and "
                                       "print (and open) its from-url link");
  serve->add_option("file", serve_options.path, "The profile (.json.gz or .json)")->required();
  serve->add_option("--port", serve_options.port, "Port on 127.0.0.1 (default: any free one)");
  serve->add_flag_callback(
      "--no-browser", [&] { serve_options.open_browser = false; }, "Only print the link");
  serve
      ->add_option("--symbol-dir", serve_options.symbol_dirs,
                   "As for record: also look for the libraries' debug files in DIR")
      ->check(CLI::ExistingDirectory)
      ->type_name("DIR");
  return serve;
}

CLI::App* add_convert_command(CLI::App& app, ConvertOptions& options) {
  CLI::App* convert = app.add_subcommand(
      "convert",
      "Write a profile that bpfprof recorded (.json.gz) in another format, from its own tables "
      "(names and addresses as recorded; nothing is symbolized again)");
  convert->add_option("profile", options.input_path, "The profile (.json.gz or .json)")->required();
  convert->add_option("-o,--output", options.output_path, "Output file")->capture_default_str();
  convert
      ->add_option("--format", options.format,
                   "pprof (the default: google/pprof's profile.proto) or collapsed")
      ->transform(CLI::CheckedTransformer(kFormats, CLI::ignore_case))
      ->type_name("FORMAT");
  return convert;
}

// The checks of `record`'s options that CLI11 cannot express.
ParsedCommandLine finish_record_options(RecordOptions options, const RecordOptionText& text,
                                        bool output_given) {
  if (!output_given) options.output_path = default_output(options.format);
  if (!text.buffer_size.empty()) {
    std::optional<uint32_t> size = parse_ring_buffer_size(text.buffer_size);
    if (!size)
      return UsageError{"--buffer-size must be a power of two from 64K to 1G (e.g. 64M), not " +
                        text.buffer_size};
    options.ring_buffer_bytes = *size;
  }
  if (std::optional<std::string> error = apply_call_graph(text.call_graph, options))
    return UsageError{*error};
  for (auto [value, name, seconds] :
       {std::tuple{&text.switch_output, "--switch-output", &options.switch_output_seconds},
        std::tuple{&text.flight_recorder, "--flight-recorder", &options.flight_recorder_seconds}}) {
    if (value->empty()) continue;
    *seconds = parse_duration(*value);
    if (!*seconds || **seconds < 1)
      return UsageError{std::string(name) +
                        " takes a duration of at least 1 s, e.g. 30s, 5m or 1h, not " + *value};
  }
  return options;
}

}  // namespace

std::optional<double> parse_duration(const std::string& text) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
  char* end = nullptr;
  const double value = strtod(text.c_str(), &end);
  const std::string unit = end;
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 0;
  if (scale == 0 || !std::isfinite(value)) return std::nullopt;
  return value * scale;
}

std::optional<uint32_t> parse_ring_buffer_size(const std::string& text) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  unsigned long long size = strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE) return std::nullopt;
  int shift = 0;
  if (*end == 'K' || *end == 'k')
    shift = 10, ++end;
  else if (*end == 'M' || *end == 'm')
    shift = 20, ++end;
  else if (*end == 'G' || *end == 'g')
    shift = 30, ++end;
  if (*end != '\0' || size > (1ull << 30)) return std::nullopt;
  size <<= shift;
  if (size < (64 << 10) || size > (1ull << 30) || (size & (size - 1)) != 0) return std::nullopt;
  return static_cast<uint32_t>(size);
}

std::optional<std::string> apply_call_graph(const std::string& text, RecordOptions& options) {
  options.fixed_stack_copy_size = false;
  if (text == "fp") {
    options.call_graph = CallGraph::kFramePointers;
    options.user_stack_copy_bytes = 0;
    return std::nullopt;
  }
  // dwarf walks stacks in the kernel first and copies where the walk cannot finish;
  // dwarf-copy always copies.
  const bool copy_only = text.starts_with("dwarf-copy");
  const std::string mode = copy_only ? "dwarf-copy" : "dwarf";
  if (text != mode && !text.starts_with(mode + ","))
    return "--call-graph must be fp or dwarf[,SIZE] (or dwarf-copy[,SIZE])";
  // With the walk, copies are the exception: mostly a new process's first milliseconds,
  // before its tables are in the kernel, when start-up code runs deep (python3.11's
  // initialisation needs 8-20 KB). They take the whole stack (BpfPrograms::Config::
  // fallback_copies_whole_stack); this size is for a stack whose end cannot be found.
  options.user_stack_copy_bytes = copy_only ? 8192 : 16384;
  options.call_graph = copy_only ? CallGraph::kDwarfCopy : CallGraph::kDwarf;
  if (text == mode) return std::nullopt;
  const std::string size_text = text.substr(mode.size() + 1);
  char* end = nullptr;
  errno = 0;
  const unsigned long size = strtoul(size_text.c_str(), &end, 0);
  if (size_text.empty() || size_text[0] == '-' || *end != '\0' || errno == ERANGE || size < 64 ||
      size > BPFPROF_MAX_STACK_COPY)
    return "--call-graph " + mode + ",SIZE: SIZE must be 64 to " +
           std::to_string(BPFPROF_MAX_STACK_COPY) + " bytes";
  options.user_stack_copy_bytes = static_cast<uint32_t>(size) & ~7u;
  options.fixed_stack_copy_size = true;
  return std::nullopt;
}

ParsedCommandLine parse_command_line(int argc, const char* const* argv) {
  CLI::App app{
      "bpfprof: sample what processes are doing (kernel and user stacks) and write a "
      "Firefox Profiler profile"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("bpfprof ") + BPFPROF_VERSION);
  app.footer(kAppFooter);
  RecordOptions record_options;
  RecordOptionText record_text;
  ReplayOptions replay_options;
  ServeOptions serve_options;
  ConvertOptions convert_options;
  CLI::App* record = add_record_command(app, record_options, record_text);
  add_record_output_options(record, record_options, record_text);
  CLI::App* replay = add_replay_command(app, replay_options);
  CLI::App* serve = add_serve_command(app, serve_options);
  CLI::App* convert = add_convert_command(app, convert_options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    if (app.exit(e, out, err) == 0) return InformationRequest{out.str()};
    const std::string help =
        app.get_subcommands().empty()
            ? "bpfprof --help"
            : "bpfprof " + app.get_subcommands().front()->get_name() + " --help";
    return UsageError{std::string(e.what()) + " (see " + help + ")"};
  }
  if (replay->parsed()) return replay_options;
  if (serve->parsed()) return serve_options;
  if (convert->parsed()) {
    if (convert->count("--output") == 0)
      convert_options.output_path = default_output(convert_options.format);
    return convert_options;
  }
  return finish_record_options(std::move(record_options), record_text,
                               record->count("--output") != 0);
}

}  // namespace bpfprof
