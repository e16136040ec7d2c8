#include "userspace/output/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <stdexcept>
#include <system_error>

namespace bpfprof {

namespace {

// Large enough that write(2) and deflate() calls are rare, small enough not to matter.
constexpr size_t kBufferSize = 256 * 1024;

}  // namespace

OutputSink::~OutputSink() = default;

// ---------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------

FileSink::FileSink(std::string path) : file_(std::move(path)) { buffer_.reserve(kBufferSize); }

void FileSink::check_writable() const {
  if (file_.committed()) throw std::logic_error("write to " + path() + " after commit");
  if (failed_) throw std::runtime_error("cannot write " + path() + ": an earlier write failed");
}

void FileSink::flush_buffer() {
  file_.write_all(buffer_);
  buffer_.clear();
}

void FileSink::write(std::string_view data) {
  check_writable();
  try {
    if (buffer_.size() + data.size() > kBufferSize) {
      flush_buffer();
      // Big writes go straight through rather than being copied in pieces.
      if (data.size() >= kBufferSize) {
        file_.write_all(data);
        bytes_written_ += data.size();
        return;
      }
    }
    buffer_.append(data);
    bytes_written_ += data.size();
  } catch (...) {
    failed_ = true;
    throw;
  }
}

void FileSink::commit() {
  check_writable();
  try {
    flush_buffer();
    file_.commit();
  } catch (...) {
    failed_ = true;
    throw;
  }
}

// ---------------------------------------------------------------------------------------

GzipFileSink::GzipFileSink(std::string path, int level)
    : file_(std::move(path)), output_buffer_(new unsigned char[kBufferSize]) {
  if (level != Z_DEFAULT_COMPRESSION && (level < 0 || level > 9))
    throw std::invalid_argument("gzip level must be 0..9, got " + std::to_string(level));
  // windowBits 15 + 16 selects the gzip wrapper instead of zlib's.
  int rc = deflateInit2(&stream_, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  if (rc == Z_MEM_ERROR) throw std::bad_alloc();
  if (rc != Z_OK) throw std::runtime_error("cannot initialize gzip for " + this->path());
  stream_initialized_ = true;
  input_buffer_.reserve(kBufferSize);
}

GzipFileSink::~GzipFileSink() {
  if (stream_initialized_) deflateEnd(&stream_);
}

void GzipFileSink::check_writable() const {
  if (file_.committed()) throw std::logic_error("write to " + path() + " after commit");
  if (failed_) throw std::runtime_error("cannot write " + path() + ": an earlier write failed");
}

void GzipFileSink::deflate_input(std::string_view input, int flush_mode) {
  // avail_in is 32 bits; feed huge inputs in slices, finishing only on the last one.
  constexpr size_t kMaxSlice = 1u << 30;
  do {
    size_t slice = std::min(input.size(), kMaxSlice);
    bool last_slice = slice == input.size();
    int mode = last_slice ? flush_mode : Z_NO_FLUSH;
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
    stream_.avail_in = static_cast<uInt>(slice);
    int rc;
    do {
      stream_.next_out = output_buffer_.get();
      stream_.avail_out = static_cast<uInt>(kBufferSize);
      rc = deflate(&stream_, mode);
      if (rc == Z_STREAM_ERROR)
        throw std::runtime_error("cannot compress " + path() + ": zlib stream error");
      size_t produced = kBufferSize - stream_.avail_out;
      file_.write_all({reinterpret_cast<const char*>(output_buffer_.get()), produced});
      compressed_bytes_ += produced;
      // A full output buffer means deflate may have more to give.
    } while (stream_.avail_out == 0 || (mode == Z_FINISH && rc != Z_STREAM_END));
    input.remove_prefix(slice);
  } while (!input.empty());
}

void GzipFileSink::compress_buffer() {
  deflate_input(input_buffer_, Z_NO_FLUSH);
  input_buffer_.clear();
}

void GzipFileSink::write(std::string_view data) {
  check_writable();
  try {
    if (input_buffer_.size() + data.size() > kBufferSize) {
      compress_buffer();
      if (data.size() >= kBufferSize) {
        deflate_input(data, Z_NO_FLUSH);
        bytes_written_ += data.size();
        return;
      }
    }
    input_buffer_.append(data);
    bytes_written_ += data.size();
  } catch (...) {
    failed_ = true;
    throw;
  }
}

void GzipFileSink::commit() {
  check_writable();
  try {
    deflate_input(input_buffer_, Z_FINISH);
    input_buffer_.clear();
    file_.commit();
  } catch (...) {
    failed_ = true;
    throw;
  }
}

// ---------------------------------------------------------------------------------------

std::unique_ptr<CommittableSink> open_output(const std::string& path, int gzip_level) {
  if (path.ends_with(".gz")) return std::make_unique<GzipFileSink>(path, gzip_level);
  return std::make_unique<FileSink>(path);
}

}  // namespace bpfprof
