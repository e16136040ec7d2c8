#include "userspace/session/output_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "symbols/util/text.h"

namespace bpfprof {

void give_to_user(const std::string& path, const std::optional<RunAsUser>& user) {
  // lchown: a link that replaced the file meanwhile gives nothing of root's away.
  if (user && lchown(path.c_str(), user->uid, user->gid) != 0)
    fprintf(stderr, "bpfprof: cannot give %s to %s: %s\n", path.c_str(), user->name.c_str(),
            strerror(errno));
}

OutputWriter::OutputWriter(std::string path, std::optional<RunAsUser> invoking_user)
    : path_(std::move(path)), sink_(open_output(path_)), invoking_user_(std::move(invoking_user)) {}

void OutputWriter::move_to(const std::string& path) {
  try {
    sink_ = open_output(path);
    path_ = path;
  } catch (const std::exception&) {
  }
}

std::optional<OutputWriter::Written> OutputWriter::write(const Write& make,
                                                         WritingProfile& writing) {
  std::string error;
  if (std::optional<RunReport> report = write_to(*sink_, make, &error))
    return Written{path_, std::move(*report)};
  fprintf(stderr, "bpfprof: cannot write the profile: %s\n", error.c_str());
  std::optional<Written> written = write_elsewhere(make, writing);
  if (written) fprintf(stderr, "bpfprof: wrote the profile to %s instead\n", written->path.c_str());
  return written;
}

// The report, or nullopt with the reason in `error`.
std::optional<RunReport> OutputWriter::write_to(CommittableSink& sink, const Write& make,
                                                std::string* error) {
  try {
    RunReport report = make(sink);
    sink.commit();
    return report;
  } catch (const std::exception& e) {
    *error = e.what();
    return std::nullopt;
  }
}

std::vector<std::string> OutputWriter::fallback_directories() const {
  const char* tmpdir = getenv("TMPDIR");
  std::vector<std::string> dirs{tmpdir && *tmpdir ? tmpdir : "/tmp"};
  const char* home = invoking_user_ ? invoking_user_->home.c_str() : getenv("HOME");
  if (home && *home) {
    const std::string cache = std::string(home) + "/.cache";
    for (const std::string& dir : {cache, cache + "/bpfprof"}) {
      if (mkdir(dir.c_str(), 0755) == 0) give_to_invoking_user(dir);
    }
    dirs.push_back(cache + "/bpfprof");
  }
  return dirs;
}

std::optional<OutputWriter::Written> OutputWriter::write_elsewhere(const Write& make,
                                                                   WritingProfile& writing) {
  for (const std::string& dir : fallback_directories()) {
    const std::string path = dir + "/" + base_name(path_);
    if (path == path_) continue;
    std::string error;
    try {
      std::unique_ptr<CommittableSink> sink = open_output(path);
      writing.now_writing(sink->temp_path());
      if (std::optional<RunReport> report = write_to(*sink, make, &error))
        return Written{path, std::move(*report)};
    } catch (const std::exception& e) {
      error = e.what();
    }
    fprintf(stderr, "bpfprof: cannot write the profile there either: %s\n", error.c_str());
  }
  fprintf(stderr, "bpfprof: no profile written\n");
  return std::nullopt;
}

}  // namespace bpfprof
