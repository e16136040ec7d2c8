// Byte sinks for the profile writer. File sinks write to a temporary file next to the
// target and rename() it into place on commit(), so a crash or an error never leaves a
// half-written profile under the target name.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "symbols/util/atomic_file.h"

namespace bpfprof {

class OutputSink {
 public:
  virtual ~OutputSink();
  virtual void write(std::string_view data) = 0;
};

// Accumulates everything in memory; for tests and small documents.
class StringSink final : public OutputSink {
 public:
  void write(std::string_view data) override { data_.append(data); }
  const std::string& str() const { return data_; }
  std::string take() { return std::move(data_); }

 private:
  std::string data_;
};

// A sink whose output becomes visible only on commit(). Errors throw std::runtime_error
// with a one-line message naming the target path; after an error every further write()
// or commit() throws too. Writing after commit() throws std::logic_error.
class CommittableSink : public OutputSink {
 public:
  virtual void commit() = 0;
  // Bytes handed to write() so far (before any compression).
  virtual size_t bytes_written() const = 0;
  virtual const std::string& path() const = 0;
  // The temporary file being written (to remove it when the process must exit at once).
  virtual const std::string& temp_path() const = 0;
};

// Uncompressed file output.
class FileSink final : public CommittableSink {
 public:
  explicit FileSink(std::string path);
  void write(std::string_view data) override;
  void commit() override;
  size_t bytes_written() const override { return bytes_written_; }
  const std::string& path() const override { return file_.target_path(); }
  const std::string& temp_path() const override { return file_.temp_path(); }

 private:
  void flush_buffer();
  void check_writable() const;

  AtomicReplaceFile file_;
  std::string buffer_;
  size_t bytes_written_ = 0;
  bool failed_ = false;
};

// gzip (deflate with a gzip header) file output.
class GzipFileSink final : public CommittableSink {
 public:
  // Level 3: as small as zlib's default (6) for profiles, in half the time.
  static constexpr int kDefaultLevel = 3;

  // level: 0 (store) .. 9 (best); Z_DEFAULT_COMPRESSION (-1) is accepted too.
  explicit GzipFileSink(std::string path, int level = kDefaultLevel);
  GzipFileSink(const GzipFileSink&) = delete;
  GzipFileSink& operator=(const GzipFileSink&) = delete;
  ~GzipFileSink() override;

  void write(std::string_view data) override;
  void commit() override;
  size_t bytes_written() const override { return bytes_written_; }
  // Compressed bytes produced so far (complete only after commit()).
  size_t compressed_bytes() const { return compressed_bytes_; }
  const std::string& path() const override { return file_.target_path(); }
  const std::string& temp_path() const override { return file_.temp_path(); }

 private:
  void deflate_input(std::string_view input, int flush_mode);
  void compress_buffer();
  void check_writable() const;

  AtomicReplaceFile file_;
  z_stream stream_{};
  bool stream_initialized_ = false;
  std::string input_buffer_;
  std::unique_ptr<unsigned char[]> output_buffer_;
  size_t bytes_written_ = 0;
  size_t compressed_bytes_ = 0;
  bool failed_ = false;
};

// gzip iff `path` ends with ".gz", plain otherwise.
std::unique_ptr<CommittableSink> open_output(const std::string& path,
                                             int gzip_level = GzipFileSink::kDefaultLevel);

}  // namespace bpfprof
