// Reading the ring buffers into the ingest pipeline, and what the pipeline asks of the
// kernel side in return (stack copy sizes).
#include <bpf/libbpf.h>

#include <poll.h>

#include <cerrno>
#include <chrono>

#include "bpf/events.h"
#include "profiler.skel.h"
#include "userspace/capture/bpf_programs.h"
#include "userspace/capture/event_log.h"

namespace bpfprof {

namespace {
// Returned by the event callback to stop the reading (the event it was called for is
// consumed): a poll must come back to the recorder's loop (signals, deadline, side band)
// even when events arrive faster than they are processed.
constexpr int kPollBudgetSpent = -EAGAIN;
constexpr auto kPollBudget = std::chrono::milliseconds(100);
}  // namespace

void BpfPrograms::wait(int timeout_ms, const std::vector<int>& also) {
  // Events are submitted without waking the reader (see bpf/profiler.bpf.c): this returns at
  // the timeout, at a signal, or when the buffer is filling up.
  std::vector<pollfd> fds{pollfd{lifecycle_ring_->fd(), POLLIN, 0},
                          pollfd{events_ring_->fd(), POLLIN, 0}};
  for (int fd : also) fds.push_back(pollfd{fd, POLLIN, 0});
  ::poll(fds.data(), fds.size(), timeout_ms);
}

int BpfPrograms::consume(IngestPipeline& pipeline) {
  apply_runtime_changes(pipeline);  // interpreters found in the mappings taken just before
  target_ = &pipeline;
  poll_deadline_ = std::chrono::steady_clock::now() + kPollBudget;
  events_this_poll_ = 0;
  const int n = consume_rings();
  poll_deadline_.reset();
  target_ = nullptr;
  apply_stack_copy_changes(pipeline);
  apply_runtime_changes(pipeline);
  ring_emptied_ = n != kPollBudgetSpent;
  return n == kPollBudgetSpent ? static_cast<int>(events_this_poll_) : n;
}

void BpfPrograms::read_lifecycle_ring() {
  if (target_ && lifecycle_ring_) lifecycle_ring_->consume();
}

// Forks and execs first, so that a new process's mappings are known before its samples are
// unwound. What the first call returns when on_event stopped it (kPollBudgetSpent), else the
// events read, else the first error.
int BpfPrograms::consume_rings() {
  const int lifecycle = lifecycle_ring_->consume();
  if (lifecycle == kPollBudgetSpent) return lifecycle;
  const int events = events_ring_->consume();
  if (events == kPollBudgetSpent) return events;
  if (lifecycle < 0) return lifecycle;
  if (events < 0) return events;
  return lifecycle + events;
}

int BpfPrograms::drain(IngestPipeline& pipeline) {
  target_ = &pipeline;
  const int n = consume_rings();
  target_ = nullptr;
  return n;
}

void BpfPrograms::adapt_stack_copies(IngestPipeline& pipeline) {
  if (user_stack_copy_bytes_)
    pipeline.decoder().adapt_stack_copies(user_stack_copy_bytes_, BPFPROF_MAX_STACK_COPY);
}

void BpfPrograms::apply_stack_copy_changes(IngestPipeline& pipeline) {
  Recording& recording = pipeline.recording();
  for (auto [pid, bytes] : pipeline.decoder().take_stack_copy_changes()) {
    const uint32_t key = static_cast<uint32_t>(pid.value);
    if (bpf_map__update_elem(skeleton_->maps.stack_copy_bytes_by_process, &key, sizeof(key), &bytes,
                             sizeof(bytes), BPF_ANY) == 0 &&
        bytes > user_stack_copy_bytes_)
      recording.stats.raised_stack_copies[pid] = bytes;
  }
  // Where the kernel gives an exec of the file the size at once (bpf/profiler.bpf.c, on_exec).
  for (auto [file, bytes] : pipeline.decoder().take_stack_copy_file_changes())
    bpf_map__update_elem(skeleton_->maps.stack_copy_bytes_by_file, &file, sizeof(file), &bytes,
                         sizeof(bytes), BPF_ANY);
}

int BpfPrograms::on_event(void* context, void* data, size_t size) {
  auto* self = static_cast<BpfPrograms*>(context);
  if (!self->target_) return 0;
  // Saved after it is taken: the mappings read for it (IngestPipeline::read_lifecycle_with)
  // go into the saved stream before it, as a replay must take them.
  self->target_->take_bpf_event(data, size);
  if (self->event_log_) self->event_log_->write_bpf_event(data, size);
  // Checking the clock every 256 events keeps its cost out of the per-event path.
  if (self->poll_deadline_ && ++self->events_this_poll_ % 256 == 0 &&
      std::chrono::steady_clock::now() > *self->poll_deadline_)
    return kPollBudgetSpent;
  return 0;
}

}  // namespace bpfprof
