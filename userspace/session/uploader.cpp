#include "userspace/session/uploader.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <memory>

#include "userspace/session/curl_on_demand.h"

namespace bpfprof {

namespace {

struct CurlDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct HeadersDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

std::string escaped(CURL* curl, const std::string& text) {
  char* e = curl_easy_escape(curl, text.c_str(), static_cast<int>(text.size()));
  std::string out = e ? e : "";
  curl_free(e);
  return out;
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// libcurl's progress callback: a non-zero return ends the transfer (finish() cut it off).
int abort_if_stopping(void* stopping, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<std::atomic<bool>*>(stopping)->load() ? 1 : 0;
}

size_t discard_answer(char*, size_t size, size_t count, void*) { return size * count; }

}  // namespace

Uploader::Uploader(Options options) : options_(std::move(options)) {
  static const CURLcode initialized = curl_global_init(CURL_GLOBAL_DEFAULT);
  (void)initialized;
  thread_ = std::thread([this] { run(); });
}

Uploader::~Uploader() { finish(0); }

std::string Uploader::ingest_url(const Options& options, double from_s, double until_s) {
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  std::string name = options.name;
  if (name.find('{') == std::string::npos) name += "{host=" + host_name() + "}";
  std::string base = options.url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/ingest?name=" + escaped(curl.get(), name) +
         "&from=" + std::to_string(static_cast<int64_t>(std::floor(from_s))) +
         "&until=" + std::to_string(static_cast<int64_t>(std::ceil(until_s))) +
         "&format=pprof&sampleRate=" + std::to_string(options.sample_rate_hz) + "&spyName=bpfprof";
}

void Uploader::submit(std::string pprof, double from_s, double until_s) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (queue_.size() >= options_.max_queued) {
      queue_.pop_front();
      ++counts_.dropped;
    }
    queue_.push_back(Item{std::move(pprof), from_s, until_s});
  }
  changed_.notify_all();
}

Uploader::Counts Uploader::finish(double wait_s) {
  std::unique_lock lock(mutex_);
  if (thread_.joinable()) {
    changed_.wait_for(lock, std::chrono::duration<double>(wait_s),
                      [&] { return queue_.empty() && !busy_; });
    stopping_ = true;
    abort_ = true;
    counts_.dropped += queue_.size();
    queue_.clear();
    lock.unlock();
    changed_.notify_all();
    thread_.join();
    lock.lock();
  }
  return counts_;
}

void Uploader::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    const bool sent = send(item);
    lock.lock();
    busy_ = false;
    ++(sent ? counts_.sent : counts_.failed);
    changed_.notify_all();
  }
}

bool Uploader::send(const Item& item) {
  double delay_s = options_.retry_delay_s;
  for (int attempt = 1;; ++attempt) {
    bool retry = false;
    if (post(item, retry)) return true;
    if (!retry || attempt >= options_.attempts) return false;
    std::unique_lock lock(mutex_);
    if (changed_.wait_for(lock, std::chrono::duration<double>(delay_s), [&] { return stopping_; }))
      return false;
    delay_s *= 2;
  }
}

bool Uploader::post(const Item& item, bool& retry) {
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return false;
  const std::string url = ingest_url(options_, item.from_s, item.until_s);
  std::unique_ptr<curl_slist, HeadersDeleter> headers(
      curl_slist_append(nullptr, "Content-Type: application/octet-stream"));
  CURL* c = curl.get();
  curl_set(c, CURLOPT_URL, url.c_str());
  curl_set(c, CURLOPT_POST, 1L);
  curl_set(c, CURLOPT_POSTFIELDS, item.body.data());
  curl_set(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(item.body.size()));
  curl_set(c, CURLOPT_HTTPHEADER, headers.get());
  curl_set(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout_s * 1000));
  curl_set(c, CURLOPT_NOSIGNAL, 1L);  // a thread of its own: no SIGALRM for timeouts
  curl_set(c, CURLOPT_NOPROGRESS, 0L);
  curl_set(c, CURLOPT_XFERINFOFUNCTION, abort_if_stopping);
  curl_set(c, CURLOPT_XFERINFODATA, &abort_);
  curl_set(c, CURLOPT_WRITEFUNCTION, discard_answer);
  const CURLcode result = curl_easy_perform(c);
  long status = 0;
  curl_get(c, CURLINFO_RESPONSE_CODE, &status);
  std::string error;
  if (result != CURLE_OK)
    error = curl_easy_strerror(result);
  else if (status < 200 || status >= 300)
    error = "HTTP " + std::to_string(status);
  if (error.empty()) return true;
  retry = result != CURLE_OK || status >= 500;
  std::lock_guard lock(mutex_);
  counts_.last_error = error;
  return false;
}

}  // namespace bpfprof
