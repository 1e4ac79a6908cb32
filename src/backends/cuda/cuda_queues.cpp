// Streams as queues and pooled events as fences. get_submitted records an event
// on the stream; get_completed polls events in order; wait synchronizes one.
#include <algorithm>

#include "backends/cuda/cuda_state.hpp"
#include "memkit/errors.hpp"

namespace memkit {

using cuda_detail::throw_cuda_error;

void cuda_backend::state::check_queue(queue_id queue, const char* function) const {
  if (queue >= options.queue_count) [[unlikely]] {
    throw invalid_argument(std::string("[memkit::cuda_backend::") + function + "] queue " +
                           std::to_string(queue) + " does not exist; the backend has " +
                           std::to_string(options.queue_count));
  }
}

queue_id cuda_backend::get_queue(CUstream_st* stream) {
  state& s = *state_;
  if (stream == nullptr) return 0;
  // Registered slots never change, so a scan without the lock is safe.
  std::uint32_t count = s.stream_count.load(std::memory_order_acquire);
  for (std::uint32_t q = 1; q < count; ++q) {
    if (s.streams[q].load(std::memory_order_relaxed) == stream) return q;
  }
  if (stream == cudaStreamPerThread) {
    throw invalid_argument(
        "[memkit::cuda_backend::get_queue] cudaStreamPerThread names another stream on every "
        "thread; pass the thread's stream handle instead");
  }
  std::lock_guard lock(s.register_mutex);
  count = s.stream_count.load(std::memory_order_relaxed);
  for (std::uint32_t q = 1; q < count; ++q) {
    if (s.streams[q].load(std::memory_order_relaxed) == stream) return q;
  }
  if (count == s.options.queue_count) {
    throw invalid_argument("[memkit::cuda_backend::get_queue] every one of the " +
                           std::to_string(s.options.queue_count) +
                           " queues is taken; raise cuda_options::queue_count");
  }
  s.streams[count].store(stream, std::memory_order_relaxed);
  s.stream_count.store(count + 1, std::memory_order_release);
  return count;
}

CUstream_st* cuda_backend::get_stream(queue_id queue) const {
  state_->check_queue(queue, "get_stream");
  return state_->streams[queue].load(std::memory_order_acquire);
}

std::uint64_t cuda_backend::get_submitted(queue_id queue) {
  state& s = *state_;
  s.check_queue(queue, "get_submitted");
  cuda_detail::device_scope scope(s.options.device);
  std::lock_guard lock(s.fence_mutex);
  cudaEvent_t event = nullptr;
  // Events come back when polled; without polls, take back the completed ones here
  // rather than create events without end.
  if (s.event_pool.empty()) s.poll_locked(queue, "get_submitted");
  if (!s.event_pool.empty()) {
    event = s.event_pool.back();
    s.event_pool.pop_back();
  } else {
    const cudaError_t error = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (error != cudaSuccess) throw_cuda_error("get_submitted", "cudaEventCreate", error);
    s.counters.events_created++;
  }
  const cudaError_t error = cudaEventRecord(event, s.streams[queue].load());
  if (error != cudaSuccess) {
    s.event_pool.push_back(event);
    throw_cuda_error("get_submitted", "cudaEventRecord", error);
  }
  s.counters.events_recorded++;
  cuda_detail::queue_fences& qf = s.queues[queue];
  qf.pending.push_back({++qf.submitted, event});
  return qf.submitted;
}

std::uint64_t cuda_backend::get_completed(queue_id queue) const {
  const state& s = *state_;
  s.check_queue(queue, "get_completed");
  std::lock_guard lock(s.fence_mutex);
  s.poll_locked(queue, "get_completed");
  return s.queues[queue].completed;
}

void cuda_backend::state::poll_locked(queue_id queue, const char* function) const {
  cuda_detail::queue_fences& qf = queues[queue];
  while (!qf.pending.empty()) {
    const cuda_detail::pending_fence front = qf.pending.front();
    const cudaError_t error = cudaEventQuery(front.event);
    counters.event_queries++;
    if (error == cudaErrorNotReady) break;
    if (error != cudaSuccess) throw_cuda_error(function, "cudaEventQuery", error);
    qf.completed = front.value;
    qf.pending.pop_front();
    recycle_locked(front.event);
  }
}

void cuda_backend::wait(fence f) {
  state& s = *state_;
  s.check_queue(f.queue, "wait");
  cudaEvent_t event = nullptr;
  std::uint64_t value = 0;
  {
    std::lock_guard lock(s.fence_mutex);
    const cuda_detail::pending_fence* pending = s.find_pending_locked(f, "wait");
    if (!pending) return;
    event = pending->event;
    value = pending->value;
    s.waits_in_progress++;
  }
  s.counters.waits++;
  const cudaError_t error = cudaEventSynchronize(event);
  std::lock_guard lock(s.fence_mutex);
  if (--s.waits_in_progress == 0) {
    s.event_pool.insert(s.event_pool.end(), s.parked_events.begin(), s.parked_events.end());
    s.parked_events.clear();
  }
  if (error != cudaSuccess) throw_cuda_error("wait", "cudaEventSynchronize", error);
  // Events complete in order on a stream: everything up to `value` is done.
  cuda_detail::queue_fences& qf = s.queues[f.queue];
  while (!qf.pending.empty() && qf.pending.front().value <= value) {
    s.recycle_locked(qf.pending.front().event);
    qf.pending.pop_front();
  }
  qf.completed = std::max(qf.completed, value);
}

bool cuda_backend::order_after(queue_id queue, fence f) {
  state& s = *state_;
  s.check_queue(queue, "order_after");
  s.check_queue(f.queue, "order_after");
  if (queue == f.queue) return true;  // a stream is ordered already
  cuda_detail::device_scope scope(s.options.device);
  std::lock_guard lock(s.fence_mutex);  // the event stays this fence's while waited on
  s.poll_locked(f.queue, "order_after");
  const cuda_detail::pending_fence* pending = s.find_pending_locked(f, "order_after");
  if (!pending) return true;
  CUstream_st* stream = s.streams[queue].load();
  // A stream being captured into a graph may not wait on an event recorded outside it.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
      capture != cudaStreamCaptureStatusNone)
    return false;
  const cudaError_t error = cudaStreamWaitEvent(stream, pending->event, 0);
  if (error != cudaSuccess) throw_cuda_error("order_after", "cudaStreamWaitEvent", error);
  s.counters.orders++;
  return true;
}

const cuda_detail::pending_fence* cuda_backend::state::find_pending_locked(
    fence f, const char* function) const {
  const cuda_detail::queue_fences& qf = queues[f.queue];
  if (f.value <= qf.completed) return nullptr;
  if (f.value > qf.submitted) {
    throw invalid_argument(std::string("[memkit::cuda_backend::") + function + "] fence " +
                           std::to_string(f.value) + " on queue " + std::to_string(f.queue) +
                           " was never submitted; the latest is " + std::to_string(qf.submitted));
  }
  // Events complete in order: the first one at or past f covers it.
  return &*std::find_if(qf.pending.begin(), qf.pending.end(),
                        [&](const cuda_detail::pending_fence& p) { return p.value >= f.value; });
}

void cuda_backend::state::recycle_locked(cudaEvent_t event) const {
  (waits_in_progress > 0 ? parked_events : event_pool).push_back(event);
}

void cuda_backend::state::destroy_events() {
  std::lock_guard lock(fence_mutex);
  for (cuda_detail::queue_fences& qf : queues) {
    for (const cuda_detail::pending_fence& p : qf.pending) event_pool.push_back(p.event);
    qf.pending.clear();
  }
  event_pool.insert(event_pool.end(), parked_events.begin(), parked_events.end());
  parked_events.clear();
  // At process exit the runtime may be gone already; its events went with it.
  for (cudaEvent_t event : event_pool) cudaEventDestroy(event);
  event_pool.clear();
}

}  // namespace memkit
