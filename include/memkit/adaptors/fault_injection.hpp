// fault_injection_adaptor: wraps any backend and makes its calls fail on a schedule,
// so that tests and fuzzers can check what the allocator does when the device says no.
//
//   segments         allocate_segment returns 0 (the device has no room)
//   virtual memory   reserve_range and create_page return 0; map and unmap throw
//                    injected_fault (the interface has no other failure channel)
//   fences           get_completed reports late: what was complete some queries
//                    ago on that queue (a fixed or seeded random lag per query, so
//                    queues finish out of order with respect to each other)
//
// A schedule fails every Nth call, each call with a seeded random rate, or the calls
// whose 1-based numbers are listed; calls are numbered per schedule. Frees, releases
// and waits are never failed: they cannot be refused. Every injected fault is
// counted. The adaptor is thread-safe and holds no lock across an upstream call.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "memkit/backend.hpp"
#include "memkit/device_data.hpp"

namespace memkit {

// A backend call that failed because the schedule said so.
class injected_fault : public error {
 public:
  using error::error;
};

struct fault_schedule {
  std::uint64_t every = 0;           // every Nth call fails; 0: off
  double rate = 0.0;                 // each call fails with this probability
  std::uint64_t seed = 1;            // for `rate`
  std::vector<std::uint64_t> calls;  // these call numbers (1-based) fail

  bool is_off() const noexcept { return every == 0 && rate <= 0.0 && calls.empty(); }
};

// The virtual-memory calls a schedule covers (a mask).
enum vm_call : unsigned {
  vm_reserve_range = 1,
  vm_create_page = 2,
  vm_map = 4,
  vm_unmap = 8,
  vm_all = 15,
};

struct fault_injection_options {
  fault_schedule segments;        // allocate_segment
  fault_schedule virtual_memory;  // the calls in vm_calls, counted together
  unsigned vm_calls = vm_all;
  // order_after: a scheduled call answers false, as a backend does where the queue
  // cannot take the dependency now (a CUDA stream being captured into a graph).
  fault_schedule orderings;
  // get_completed reports the value the upstream had `completion_lag` queries ago on
  // that queue; with random_lag, a seeded random lag in [0, completion_lag] per query.
  std::uint32_t completion_lag = 0;
  bool random_lag = false;
  std::uint64_t lag_seed = 1;
  // Each unmap waits this long before it reaches the upstream, as a slow driver
  // call would: it widens the windows where other threads' calls overlap it.
  std::uint32_t unmap_delay_us = 0;
};

struct fault_counters {
  std::uint64_t segment_calls = 0;   // allocate_segment calls seen
  std::uint64_t segment_faults = 0;  // of them failed on purpose
  std::uint64_t vm_calls = 0;        // scheduled virtual-memory calls seen
  std::uint64_t vm_faults = 0;
  std::uint64_t late_completions = 0;   // get_completed answers below the upstream's
  std::uint64_t upstream_failures = 0;  // map and unmap calls the upstream itself refused
  std::uint64_t order_calls = 0;        // order_after calls seen
  std::uint64_t order_refusals = 0;     // of them answered false on purpose
  std::uint64_t get_faults() const noexcept { return segment_faults + vm_faults; }
};

// Transfers and kernels (the data interface) pass through to the upstream, never failed.
class fault_injection_adaptor final : public backend, public forwarded_data {
 public:
  explicit fault_injection_adaptor(backend& upstream, fault_injection_options options = {});

  const device_facts& get_facts() const noexcept override { return upstream_.get_facts(); }
  address_t allocate_segment(std::size_t bytes) override;
  void free_segment(address_t address, std::size_t bytes) override;
  std::uint64_t get_submitted(queue_id queue) override;
  std::uint64_t get_completed(queue_id queue) const override;
  void wait(fence f) override;
  bool order_after(queue_id queue, fence f) override;
  void set_wired_limit(std::size_t bytes) override;
  address_t reserve_range(std::size_t bytes) override;
  void release_range(address_t base, std::size_t bytes) override;
  page_id create_page(std::size_t bytes) override;
  void release_page(page_id page, std::size_t bytes) override;
  void map(address_t at, page_id page, std::size_t bytes) override;
  void set_access(address_t at, std::size_t bytes) override;
  void unmap(address_t at, std::size_t bytes) override;

  // Replace a schedule; its call count starts again at 0.
  void set_segment_schedule(fault_schedule schedule);
  void set_vm_schedule(fault_schedule schedule, unsigned calls = vm_all);
  // Off: every call passes through (counts keep running); the lag stays.
  void set_enabled(bool on);
  void set_completion_lag(std::uint32_t lag, bool random);

  fault_counters get_counters() const;
  backend& get_upstream() const noexcept { return upstream_; }

 private:
  struct schedule_state {
    fault_schedule schedule;
    std::mt19937_64 random;
    std::uint64_t calls = 0;
    explicit schedule_state(fault_schedule s) : schedule(std::move(s)), random(schedule.seed) {}
    bool next();  // counts a call; true when it must fail
  };
  struct queue_history {
    std::deque<std::uint64_t> values;  // upstream answers, oldest first
    std::uint64_t reported = 0;        // highest value reported (answers never go back)
  };

  bool should_fail_vm(vm_call which, std::uint64_t* call);
  // Runs an upstream call, counting it when the upstream throws.
  template <class Call>
  void count_upstream_failure(Call&& call);
  queue_history& get_history(queue_id queue) const;

  backend& upstream_;
  const std::uint32_t unmap_delay_us_;
  mutable std::mutex mutex_;  // guards everything below; never held across an upstream call
  bool enabled_ = true;
  schedule_state segments_;
  schedule_state vm_;
  schedule_state orderings_;
  unsigned vm_calls_;
  std::uint32_t lag_;
  bool random_lag_;
  mutable std::mt19937_64 lag_random_;
  mutable std::vector<queue_history> histories_;
  mutable fault_counters counters_;
};

}  // namespace memkit
