// Per-queue fence bookkeeping: which frees are safe on every queue. Numbers only,
// under the allocator's lock; the allocator makes the backend calls (get_submitted,
// get_completed, wait) without it. Design: include/memkit/allocator.hpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "memkit/types.hpp"
#include "pools/segment_pool.hpp"

namespace memkit {

// A fence recorded on one queue.
struct queue_record {
  serial_t serial;    // every block freed on the queue with free_serial <= serial ...
  fence_value value;  // ... is safe once this fence completes
};
struct queue_state {
  serial_t last_free_serial = 0;     // latest free touching this queue
  std::deque<queue_record> records;  // outstanding fences, oldest first
};

class fence_tracker {
 public:
  explicit fence_tracker(std::size_t queue_count)
      : safe_serial_(queue_count, 0),
        ordered_serial_(queue_count * queue_count, 0),
        queues_(queue_count) {}

  std::size_t get_queue_count() const { return queues_.size(); }
  // Per queue: frees up to here are safe everywhere. Stable for the tracker's life
  // (the segment pools keep it).
  const serial_t* get_safe_serials() const { return safe_serial_.data(); }
  bool is_safe(queue_id queue, serial_t free_serial) const {
    return free_serial <= safe_serial_[queue];
  }
  // What the pools read to know which frees a queue may reuse (stable, as above).
  pools::reuse_view get_reuse_view() const {
    return {safe_serial_.data(), ordered_serial_.data(), queues_.size()};
  }
  // Other queues with frees `queue` may not reuse yet: neither safe nor ordered.
  std::vector<queue_id> find_unordered(queue_id queue) const;
  // `queue`'s later work waits, on the device, for `after`'s work before its frees up
  // to `serial`: those frees are reusable on `queue`.
  void note_ordered(queue_id queue, queue_id after, serial_t serial) {
    serial_t& ordered = ordered_serial_[queue * queues_.size() + after];
    ordered = std::max(ordered, serial);
  }
  serial_t get_last_free_serial(queue_id queue) const { return queues_[queue].last_free_serial; }
  void note_free(queue_id queue, serial_t serial) { queues_[queue].last_free_serial = serial; }
  // Whether a free that idled pages should record a fence now: when none is
  // outstanding on `queue`, or the newest is kFreesPerFence frees old. Pages idled
  // in between wait for the next one, or for the fence a refresh records.
  bool wants_record(queue_id queue, serial_t serial) const {
    const queue_state& qs = queues_[queue];
    return qs.records.empty() || serial >= qs.records.back().serial + kFreesPerFence;
  }
  bool has_unsafe_frees() const;

  // A refresh, around the backend calls: the queues to record a fence on and to
  // poll; then, with what the backend said, the fences recorded and the completed
  // ones made safe. apply_refresh returns whether any queue's safe serial advanced.
  struct refresh_plan {
    std::vector<queue_id> record;
    std::vector<queue_id> poll;
    serial_t serial = 0;  // frees so far, covered by the fences recorded
  };
  refresh_plan plan_refresh(serial_t serial_now) const;
  bool apply_refresh(const refresh_plan& plan, const std::vector<fence_value>& submitted,
                     const std::vector<fence_value>& completed);

  // A fence with `value` on `queue` for its frees up to `serial` (bounded: past
  // kMaxRecords outstanding, the newest stands for those before it).
  void record(queue_id queue, serial_t serial, fence_value value);
  // The oldest outstanding fence on `queue` covering frees up to `serial`.
  std::optional<fence> find_covering(queue_id queue, serial_t serial) const;
  // The newest outstanding fence of each queue (of `only`, if given).
  std::vector<fence> get_newest(std::optional<queue_id> only) const;
  // The next fence to wait for on the way to `until` (a fence per queue): on the first
  // queue with outstanding fences up to its fence there, the one a quarter of the way
  // through them (the oldest when there are few: a wait then gives back a share of the
  // rest, and the passes stay few however many fences are outstanding); none once
  // every fence of `until` has completed.
  std::optional<fence> find_next(const std::vector<fence>& until) const;

  static constexpr std::size_t kMaxRecords = 1024;  // outstanding per queue
  // Frees between fences recorded for idle pages. One for every free that idled a
  // page was 60-330 events a step on the suite's loops; one per 64 frees, or where
  // none is outstanding, places the same with as few waits (docs/BENCHMARKS.md).
  static constexpr serial_t kFreesPerFence = 64;

 private:
  std::vector<serial_t> safe_serial_;  // never resized: get_safe_serials stays valid
  // [q * queues + a]: frees on a up to it are reusable on q (q waits for a's fence);
  // never resized either
  std::vector<serial_t> ordered_serial_;
  std::vector<queue_state> queues_;
};

}  // namespace memkit
