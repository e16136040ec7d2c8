// Streaming JSON writer: no document tree, output goes to an OutputSink through a small
// buffer. Commas are inserted automatically; misuse (a value where a key is due, unbalanced
// end_*) is caught by assert() in debug builds and ignored harmlessly in release builds.
//
// Strings are arbitrary bytes. Valid UTF-8 passes through; every maximal invalid subpart
// (stray continuation, overlong form, surrogate, > U+10FFFF, truncated sequence) becomes
// U+FFFD, so the output is always valid UTF-8 and valid JSON.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/output/output_file.h"

namespace bpfprof {

// `s` with every maximal invalid UTF-8 subpart replaced by U+FFFD, as string() writes it
// (for other formats that need valid UTF-8: protobuf strings).
std::string to_valid_utf8(std::string_view s);

class JsonWriter {
 public:
  static constexpr size_t kFlushThreshold = 64 * 1024;

  explicit JsonWriter(OutputSink& sink);
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;
  // Flushes what is buffered. Sink errors are swallowed here (a destructor must not
  // throw); call flush() first to see them.
  ~JsonWriter();

  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(std::string_view name);

  void string(std::string_view s);
  void number(std::int64_t v);
  void number(std::uint64_t v);
  // Shortest text that reads back to the same double; NaN and infinities become null.
  void number(double v);
  void number(float v);
  // Any other integer type, so that number(42) is not ambiguous.
  template <std::integral T>
  requires(!std::same_as<T, bool>) void number(T v) {
    if constexpr (std::is_signed_v<T>)
      number(static_cast<std::int64_t>(v));
    else
      number(static_cast<std::uint64_t>(v));
  }
  void boolean(bool b);
  void null();

  // value(): picks the right writer by type; field(): key() then value().
  void value(std::string_view s) { string(s); }
  void value(const char* s) { string(s); }  // keeps string literals away from bool
  void value(const std::string& s) { string(s); }
  void value(bool b) { boolean(b); }
  void value(std::nullptr_t) { null(); }
  template <typename T>
  requires(std::integral<T> || std::floating_point<T>) && (!std::same_as<T, bool>)void value(T v) {
    number(v);
  }
  template <typename T>
  void field(std::string_view name, T&& v) {
    key(name);
    value(std::forward<T>(v));
  }

  // Hands everything buffered to the sink.
  void flush();
  // True once exactly one top-level value has been written and closed.
  bool complete() const { return root_written_ && scopes_.empty(); }
  size_t depth() const { return scopes_.size(); }

 private:
  struct Scope {
    bool is_object;
    bool has_members;
  };

  void before_value();
  void open_scope(bool is_object, char bracket);
  void close_scope(bool is_object, char bracket);
  void write_quoted(std::string_view s);
  void append(std::string_view s) { buffer_.append(s); }
  void maybe_flush() {
    if (buffer_.size() >= kFlushThreshold) flush();
  }

  OutputSink& sink_;
  std::string buffer_;
  std::vector<Scope> scopes_;
  bool expecting_value_after_key_ = false;
  bool root_written_ = false;
};

}  // namespace bpfprof
