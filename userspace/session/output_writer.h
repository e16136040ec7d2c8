// The profile file of `record`: its place, opened before anything runs (an unwritable
// directory fails then, not after the recording), the fallback places when writing there
// fails at the end (a full disk, a directory removed meanwhile), and the file given to the
// user who ran bpfprof through sudo.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "userspace/output/output_file.h"
#include "userspace/output/run_report.h"
#include "userspace/session/launcher.h"
#include "userspace/session/signals.h"

namespace bpfprof {

// Gives `path` to `user` (nothing without one); a failure is said in one line.
void give_to_user(const std::string& path, const std::optional<RunAsUser>& user);

class OutputWriter {
 public:
  // Makes the profile into a sink; throws what fails. The writer commits the sink.
  using Write = std::function<RunReport(OutputSink&)>;
  struct Written {
    std::string path;
    RunReport report;
  };

  // Opens `path`'s temporary file; throws when it cannot be created. `invoking_user` (through
  // sudo) gets the files written and the fallback directories made.
  OutputWriter(std::string path, std::optional<RunAsUser> invoking_user);

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return sink_->temp_path(); }
  // The profile goes to `path` instead; when it cannot be opened the output stays where it
  // was (its failure, if any, leads to the fallback places as usual).
  void move_to(const std::string& path);

  // Writes the profile to the output, else under its file name to the first fallback place
  // that takes it ($TMPDIR or /tmp, then the invoking user's ~/.cache/bpfprof), each failure
  // said in one line; nullopt when none did. `writing` learns each temporary file.
  std::optional<Written> write(const Write& make, WritingProfile& writing);

  void give_to_invoking_user(const std::string& path) const { give_to_user(path, invoking_user_); }

 private:
  std::optional<RunReport> write_to(CommittableSink& sink, const Write& make, std::string* error);
  std::vector<std::string> fallback_directories() const;
  std::optional<Written> write_elsewhere(const Write& make, WritingProfile& writing);

  std::string path_;
  std::unique_ptr<CommittableSink> sink_;
  const std::optional<RunAsUser> invoking_user_;
};

}  // namespace bpfprof
