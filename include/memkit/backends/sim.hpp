// sim: a simulated discrete device. Host-side bookkeeping only: it never touches
// the memory it hands out. Tests and trace replays run on it, deterministically.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "memkit/backend.hpp"

namespace memkit {

struct sim_options {
  std::size_t capacity = std::size_t{80} << 30;    // bytes of device memory
  std::size_t granularity = std::size_t{2} << 20;  // segment and page size unit
  std::size_t max_buffer = 0;                      // 0: the capacity
  std::size_t alignment = 256;
  std::size_t max_wired = 0;     // 0: the capacity
  std::uint32_t queue_count = 4;
  // Fences complete only when told (complete()), or, when > 0, once this many
  // later submissions have been made on the same queue.
  std::uint32_t auto_complete_after = 0;
  // wait() on an unfinished fence: false completes it at once (the device "runs"
  // the work); true blocks until another thread calls complete().
  bool wait_blocks = false;
  // Simulated device cost per call, in nanoseconds, for reports.
  std::uint64_t segment_alloc_ns = 60'000;
  std::uint64_t segment_free_ns = 30'000;
};

// Counters of every backend call.
struct sim_counters {
  std::uint64_t segment_allocs = 0;
  std::uint64_t segment_frees = 0;
  std::uint64_t failed_allocs = 0;
  std::uint64_t waits = 0;
  std::uint64_t fence_queries = 0;
  std::size_t reserved_bytes = 0;
  std::size_t peak_reserved_bytes = 0;
  std::uint64_t simulated_ns = 0;  // sum of the per-call costs
};

class sim_backend final : public backend {
 public:
  explicit sim_backend(sim_options options = {});
  ~sim_backend() override;

  const device_facts& get_facts() const noexcept override { return facts_; }
  address_t allocate_segment(std::size_t bytes) override;
  void free_segment(address_t address, std::size_t bytes) override;
  std::uint64_t get_submitted(queue_id queue) override;
  std::uint64_t get_completed(queue_id queue) const override;
  void wait(fence f) override;
  void set_wired_limit(std::size_t bytes) override;

  // Test controls.
  std::uint64_t submit(queue_id queue);      // new work on the queue; returns its fence
  void complete(queue_id queue, std::uint64_t value);  // finish work up to value
  void complete_all();
  void set_capacity(std::size_t bytes);      // change the simulated capacity
  sim_counters get_counters() const;
  std::size_t get_wired_limit() const;

 private:
  void check_queue(queue_id queue, const char* function) const;

  device_facts facts_;
  sim_options options_;
  mutable std::mutex mutex_;
  std::condition_variable completed_cv_;
  std::vector<std::uint64_t> submitted_;  // per queue
  std::vector<std::uint64_t> completed_;  // per queue
  std::map<address_t, std::size_t> segments_;
  address_t next_address_;
  std::size_t wired_limit_ = 0;
  mutable sim_counters counters_;
};

}  // namespace memkit
