#include <algorithm>
#include <string>

#include "common/helpers.hpp"
#include "memkit/backends/sim.hpp"
#include "memkit/errors.hpp"

namespace memkit {

sim_backend::sim_backend(sim_options options) : options_(options) {
  // Pages and segments are rounded to it with masks and divisions alike; another
  // value would give false out-of-memory errors.
  if (options.granularity & (options.granularity - 1)) {
    throw invalid_argument("[memkit::sim_backend] granularity " +
                           std::to_string(options.granularity) + " is not a power of two");
  }
  facts_.name = options.device ? "sim:" + std::to_string(options.device) : "sim";
  facts_.capacity = options.capacity;
  facts_.granularity = options.granularity ? options.granularity : 1;
  facts_.max_buffer = options.max_buffer ? options.max_buffer : options.capacity;
  facts_.alignment = options.alignment;
  facts_.max_wired = options.max_wired ? options.max_wired : options.capacity;
  facts_.queue_count = options.queue_count ? options.queue_count : 1;
  facts_.unified = false;
  facts_.virtual_memory = options.virtual_memory;
  facts_.queue_ordering = options.queue_ordering && facts_.queue_count > 1;
  submitted_.assign(facts_.queue_count, 0);
  completed_.assign(facts_.queue_count, 0);
  orderings_.resize(facts_.queue_count);
  reached_.assign(facts_.queue_count, 0);
  // Addresses look like a device's and never collide with host pointers in tests;
  // each device has its own 2 TiB window.
  next_address_ = (address_t{1} << 44) + (address_t{options.device % 2048} << 41);
}

sim_backend::~sim_backend() = default;

address_t sim_backend::allocate_segment(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes == 0 || bytes > facts_.max_buffer ||
      counters_.reserved_bytes + counters_.page_bytes + bytes > facts_.capacity) {
    counters_.failed_allocs++;
    return 0;
  }
  // Segments start on granules and on the device's alignment, whichever is coarser.
  const std::size_t g = std::max<std::size_t>(facts_.granularity, facts_.alignment);
  const address_t address = next_address_;
  // Leave a gap of one unit so that adjacent segments are never contiguous.
  next_address_ += common::round_up(bytes, g) + g;
  segments_.emplace(address, bytes);
  counters_.segment_allocs++;
  counters_.reserved_bytes += bytes;
  note_held_locked();
  counters_.simulated_ns += options_.segment_alloc_ns;
  return address;
}

void sim_backend::note_held_locked() {
  const std::size_t held = counters_.reserved_bytes + counters_.page_bytes;
  if (held > counters_.peak_reserved_bytes) counters_.peak_reserved_bytes = held;
}

void sim_backend::free_segment(address_t address, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  auto it = segments_.find(address);
  if (it == segments_.end() || it->second != bytes) {
    throw invalid_argument("[memkit::sim_backend::free_segment] no segment of " +
                           std::to_string(bytes) + " bytes at this address");
  }
  segments_.erase(it);
  counters_.segment_frees++;
  counters_.reserved_bytes -= bytes;
  counters_.simulated_ns += options_.segment_free_ns;
}

void sim_backend::check_queue(queue_id queue, const char* function) const {
  if (queue >= facts_.queue_count) {
    throw invalid_argument(std::string("[memkit::sim_backend::") + function + "] queue " +
                           std::to_string(queue) + " does not exist");
  }
}

std::uint64_t sim_backend::get_submitted(queue_id queue) {
  check_queue(queue, "get_submitted");
  std::lock_guard lock(mutex_);
  counters_.fences_recorded++;
  counters_.simulated_ns += options_.record_fence_ns;
  return submitted_[queue];
}

std::uint64_t sim_backend::get_completed(queue_id queue) const {
  check_queue(queue, "get_completed");
  std::lock_guard lock(mutex_);
  counters_.fence_queries++;
  counters_.simulated_ns += options_.query_fence_ns;
  return completed_[queue];
}

void sim_backend::wait(fence f) {
  check_queue(f.queue, "wait");
  std::unique_lock lock(mutex_);
  counters_.waits++;
  if (completed_[f.queue] >= f.value) return;
  counters_.unfinished_waits++;
  if (options_.wait_blocks) {
    completed_cv_.wait(lock, [&] { return completed_[f.queue] >= f.value; });
  } else {
    complete_locked(f.queue, f.value, true);
  }
}

bool sim_backend::order_after(queue_id queue, fence f) {
  check_queue(queue, "order_after");
  check_queue(f.queue, "order_after");
  if (!facts_.queue_ordering) return false;
  std::lock_guard lock(mutex_);
  if (f.value > submitted_[f.queue]) {
    throw invalid_argument("[memkit::sim_backend::order_after] fence " + std::to_string(f.value) +
                           " on queue " + std::to_string(f.queue) +
                           " was never submitted; the latest is " +
                           std::to_string(submitted_[f.queue]));
  }
  if (queue == f.queue || completed_[f.queue] >= f.value) return true;
  counters_.orders++;
  counters_.simulated_ns += options_.order_ns;
  // The wait is work on the queue, as on a CUDA stream: a fence recorded after it
  // completes only once `f` has.
  const std::uint64_t wait_value = ++submitted_[queue];
  orderings_[queue].push_back({wait_value - 1, f});
  return true;
}

bool sim_backend::is_ordered_after(queue_id queue, fence f) const {
  check_queue(queue, "is_ordered_after");
  check_queue(f.queue, "is_ordered_after");
  std::lock_guard lock(mutex_);
  // Work submitted from now on comes after every fence and wait the queue has.
  return covers_locked({queue, ~std::uint64_t{0}}, f, facts_.queue_count + 1);
}

bool sim_backend::covers_locked(fence later, fence f, std::uint32_t depth) const {
  if (completed_[f.queue] >= f.value) return true;
  if (later.queue == f.queue) return later.value >= f.value;
  if (depth == 0) return false;
  // Through the waits before `later` on its queue: ordered after what they wait for.
  return std::any_of(orderings_[later.queue].begin(), orderings_[later.queue].end(),
                     [&](const ordering& o) {
                       return o.from < later.value && covers_locked(o.after, f, depth - 1);
                     });
}

void sim_backend::complete_locked(queue_id queue, std::uint64_t value, bool run_orderings) {
  value = std::min(value, submitted_[queue]);
  reached_[queue] = std::max(reached_[queue], value);
  // The front is read afresh each time: completing another queue first may
  // complete this one too.
  std::deque<ordering>& waiting = orderings_[queue];
  while (!waiting.empty() && value > waiting.front().from) {
    const ordering o = waiting.front();
    if (completed_[o.after.queue] >= o.after.value) {
      waiting.pop_front();
      continue;
    }
    if (run_orderings) complete_locked(o.after.queue, o.after.value, true);
    if (completed_[o.after.queue] < o.after.value) {
      value = o.from;  // held until the other queue's fence completes
      break;
    }
  }
  if (value <= completed_[queue]) return;
  completed_[queue] = value;
  // Work of other queues the device reached but held for this queue's fence runs now.
  for (queue_id q = 0; q < orderings_.size(); ++q) {
    if (q != queue && reached_[q] > completed_[q] && !orderings_[q].empty() &&
        orderings_[q].front().after.queue == queue)
      complete_locked(q, reached_[q], false);
  }
}

std::uint64_t sim_backend::submit(queue_id queue) {
  check_queue(queue, "submit");
  std::lock_guard lock(mutex_);
  const std::uint64_t value = ++submitted_[queue];
  if (options_.auto_complete_after > 0 && value > options_.auto_complete_after) {
    complete_locked(queue, value - options_.auto_complete_after, false);
    completed_cv_.notify_all();
  }
  return value;
}

void sim_backend::complete(queue_id queue, std::uint64_t value) {
  check_queue(queue, "complete");
  std::lock_guard lock(mutex_);
  complete_locked(queue, value, false);
  completed_cv_.notify_all();
}

void sim_backend::complete_all() {
  std::lock_guard lock(mutex_);
  completed_ = submitted_;
  reached_ = submitted_;
  for (std::deque<ordering>& waiting : orderings_) waiting.clear();
  completed_cv_.notify_all();
}

void sim_backend::set_capacity(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  facts_.capacity = bytes;
}

void sim_backend::set_wired_limit(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  wired_limit_ = bytes;
}

std::size_t sim_backend::get_wired_limit() const {
  std::lock_guard lock(mutex_);
  return wired_limit_;
}

sim_counters sim_backend::get_counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace memkit
