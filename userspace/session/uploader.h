// --upload URL: pprof profiles pushed to a Pyroscope-compatible ingest endpoint, following
// Pyroscope's documented HTTP API (POST URL/ingest?name=APP{labels}&from=&until=
// &format=pprof&sampleRate=HZ, the profile as the body), from a thread of its own with
// retries and a bounded queue: a slow, failing or absent backend never holds up the
// recording, and the end waits for it only a bounded time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace bpfprof {

class Uploader {
 public:
  struct Options {
    std::string url;                   // the server, e.g. http://localhost:4040
    std::string name = "bpfprof.cpu";  // the application name, before its {labels}
    uint32_t sample_rate_hz = 1000;
    size_t max_queued = 4;     // profiles waiting; the oldest is dropped for a new one
    int attempts = 3;          // per profile (a 4xx answer is not retried)
    double timeout_s = 5;      // per request
    double retry_delay_s = 1;  // doubled after each failed attempt
  };
  struct Counts {
    uint64_t sent = 0;
    uint64_t failed = 0;   // every attempt failed
    uint64_t dropped = 0;  // the queue was full, or the end came first
    std::string last_error;
  };

  explicit Uploader(Options options);
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  // Queues a profile of [from, until) (seconds since the epoch).
  void submit(std::string pprof, double from_s, double until_s);
  // Waits at most `wait_s` for the queue to empty, then abandons what is left (a request
  // under way is cut off) and stops the thread.
  Counts finish(double wait_s);

  // The ingest URL of a profile: `name` gets the {host=...} label unless it has labels.
  static std::string ingest_url(const Options& options, double from_s, double until_s);

 private:
  struct Item {
    std::string body;
    double from_s;
    double until_s;
  };
  void run();
  bool send(const Item& item);  // with retries; false when every attempt failed
  // One POST: true for a 2xx answer; `retry` says whether another attempt may help.
  bool post(const Item& item, bool& retry);

  const Options options_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  bool busy_ = false;               // a profile is being sent
  bool stopping_ = false;           // finish(): no new work, cut off what runs
  std::atomic<bool> abort_{false};  // stopping_, for libcurl's progress callback
  Counts counts_;
  std::thread thread_;
};

}  // namespace bpfprof
