// A simple reference model of the allocator's public contract, and a driver that runs
// one API call at a time against an allocator on a sim device (through a fault
// injection adaptor) and checks the two agree after every call. The model-based test
// and the API fuzzer (fuzz/api_fuzz.cpp) share it.
//
// The model knows only what the contract promises: live blocks (address, size,
// request, queue), their sums, the peaks since reset_peak, the call counts, and the
// fences each freed range waits for. It checks: every block is at least the request
// rounded to 512 bytes and aligned; no two live blocks overlap; a freed range is not
// handed to another queue before the device really completed the work it was freed
// behind, or ordered that queue's later work after it (order_after); statistics equal the model's
// sums and the device's own counts; errors are the documented ones, start with "[memkit::", and
// change no live block; a request that fits beside the segments holding live blocks never fails
// when no fault was injected into it; after freeing everything and clearing the cache nothing is
// held.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "memkit/adaptors/fault_injection.hpp"
#include "memkit/memkit.hpp"

// GCC 12 reports a false -Wrestrict inside std::string's operator+ at -O3 (GCC bug
// 105329); the messages built below trigger it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace memkit::reliability {

// A broken promise: a bug in memkit (or in the model).
class model_mismatch : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

inline std::size_t round_up_to(std::size_t n, std::size_t unit) {
  return (n + unit - 1) / unit * unit;
}

struct model_block {
  std::size_t size = 0;
  std::size_t requested = 0;
  queue_id queue = 0;
  std::vector<queue_id> uses;  // record_use queues
};

struct freed_range {
  address_t address = 0;
  std::size_t size = 0;
  std::vector<fence> fences;  // the work it was freed behind, as the device counts it
};

// Counts of what the driver did, for reports.
struct driver_counts {
  std::uint64_t operations = 0;
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;
  std::uint64_t out_of_memory = 0;     // clear out_of_memory errors seen
  std::uint64_t invalid_argument = 0;  // bad calls made on purpose, each rejected
  std::uint64_t faulted_calls = 0;     // API calls during which a fault was injected
};

class api_driver {
 public:
  // `device` is the truth; `faults` wraps it and is what the allocator sees.
  api_driver(sim_backend& device, fault_injection_adaptor& faults, allocator& alloc)
      : device_(device), faults_(faults), alloc_(alloc) {}

  const std::map<address_t, model_block>& get_live() const { return live_; }
  const driver_counts& get_counts() const { return counts_; }

  // With thread caches on, a block parked in a cache still counts on the shared
  // counters the peaks are kept on, so peaks are upper bounds by design
  // (src/allocator/thread_cache.hpp); exact only when the caches are off or flushed.
  bool exact_peaks = false;

  void check(bool ok, const std::string& what) const {
    if (!ok) throw model_mismatch("[reliability] " + what);
  }

  // --- API calls, each checked against the model -------------------------------

  // Returns the address, or 0 when the request failed with a clear error.
  address_t allocate(std::size_t bytes, queue_id queue) {
    counts_.operations++;
    const std::uint64_t faults_before = faults_.get_counters().get_faults();
    const statistics before = alloc_.get_statistics();
    allocation a;
    try {
      a = alloc_.allocate(bytes, queue);
    } catch (const out_of_memory& e) {
      const bool faulted = faults_.get_counters().get_faults() != faults_before;
      counts_.faulted_calls += faulted;
      counts_.out_of_memory++;
      oom_++;
      check(std::string(e.what()).rfind("[memkit::allocate] out of memory", 0) == 0,
            std::string("unclear out_of_memory message: ") + e.what());
      check(e.get_details().requested_bytes == bytes, "out_of_memory names another request");
      check(e.get_details().active_bytes == active_, "out_of_memory reports wrong live bytes");
      if (!faulted) {
        const std::size_t need = segment_size_for(bytes);
        const std::size_t room = std::min(alloc_.get_memory_limit(), device_.get_facts().capacity);
        check(calculate_pinned_bytes() + need > room,
              "out_of_memory for " + std::to_string(bytes) + " bytes though segments with live " +
                  "blocks hold " + std::to_string(calculate_pinned_bytes()) + " of " +
                  std::to_string(room) + " bytes and no fault was injected: " + e.what());
      }
      check_all();
      return 0;
    } catch (const invalid_argument& e) {
      counts_.invalid_argument++;
      check(bytes > device_.get_facts().max_buffer || queue >= device_.get_facts().queue_count,
            std::string("invalid_argument for a valid request: ") + e.what());
      check(std::string(e.what()).rfind("[memkit::allocate]", 0) == 0,
            std::string("unclear message: ") + e.what());
      check_all();
      return 0;
    }
    counts_.faulted_calls += faults_.get_counters().get_faults() != faults_before;
    // allocate(0) is {0, 0} before any check (the contract: it costs nothing).
    check(bytes == 0 ||
              (bytes <= device_.get_facts().max_buffer && queue < device_.get_facts().queue_count),
          "an invalid request succeeded");
    if (bytes == 0) {
      check(a.address == 0 && a.size == 0, "allocate(0) is not {0, 0}");
      return 0;
    }
    counts_.allocations++;
    check(a.address != 0, "allocate returned address 0");
    check(a.size >= round_up_to(bytes, 512), "block smaller than the rounded request");
    check(a.address % device_.get_facts().alignment == 0, "block not aligned");
    auto next = live_.lower_bound(a.address);
    check(next == live_.end() || a.address + a.size <= next->first,
          "block overlaps a live block above it (handed out twice)");
    if (next != live_.begin()) {
      auto prev = std::prev(next);
      check(prev->first + prev->second.size <= a.address,
            "block overlaps a live block below it (handed out twice)");
    }
    check_fences(a.address, a.size, queue);
    live_[a.address] = {a.size, bytes, queue, {}};
    active_ += a.size;
    requested_ += bytes;
    peak_active_ = std::max(peak_active_, active_);
    peak_requested_ = std::max(peak_requested_, requested_);
    allocations_++;
    if (before.reserved_bytes <= alloc_.get_memory_limit()) {
      check(alloc_.get_statistics().reserved_bytes <= alloc_.get_memory_limit(),
            "reserved bytes grew past the memory limit");
    }
    check_all();
    return a.address;
  }

  void free(address_t address) {
    counts_.operations++;
    auto it = live_.find(address);
    check(it != live_.end(), "driver error: free of a block the model does not hold");
    std::vector<fence> fences{{it->second.queue, device_.get_submitted(it->second.queue)}};
    for (queue_id q : it->second.uses) fences.push_back({q, device_.get_submitted(q)});
    alloc_.free(address);
    counts_.frees++;
    pending_.push_back({address, it->second.size, std::move(fences)});
    active_ -= it->second.size;
    requested_ -= it->second.requested;
    frees_++;
    live_.erase(it);
    check_all();
  }

  // A call the allocator must reject: an unknown, interior or freed address.
  void free_bad(address_t address) {
    counts_.operations++;
    if (live_.count(address)) return;
    expect_invalid([&] { alloc_.free(address); }, "[memkit::free]");
  }

  void record_use(address_t address, queue_id queue) {
    counts_.operations++;
    auto it = live_.find(address);
    if (it == live_.end() || queue >= device_.get_facts().queue_count) {
      expect_invalid([&] { alloc_.record_use(address, queue); }, "[memkit::record_use]");
      return;
    }
    alloc_.record_use(address, queue);
    if (queue != it->second.queue) it->second.uses.push_back(queue);
    check_all();
  }

  void set_memory_limit(std::size_t bytes) {
    counts_.operations++;
    alloc_.set_memory_limit(bytes);
    check(alloc_.get_memory_limit() == bytes, "memory limit not kept");
    check_all();
  }

  void set_cache_limit(std::size_t bytes) {
    counts_.operations++;
    alloc_.set_cache_limit(bytes);
    check(alloc_.get_cache_limit() == bytes, "cache limit not kept");
    check_all();
  }

  void clear_cache() {
    counts_.operations++;
    alloc_.clear_cache();
    check_all();
  }

  void reset_peak() {
    counts_.operations++;
    alloc_.reset_peak();
    peak_active_ = active_;
    peak_requested_ = requested_;
    check_all();
  }

  void submit(queue_id queue) {
    counts_.operations++;
    device_.submit(queue);
  }
  void complete(queue_id queue, std::uint64_t behind) {
    counts_.operations++;
    const std::uint64_t submitted = device_.get_submitted(queue);
    device_.complete(queue, submitted > behind ? submitted - behind : 0);
  }

  // Frees every live block, lets the device finish, clears the cache: nothing may
  // stay reserved, on the allocator's books or the device's.
  void drain() {
    while (!live_.empty()) free(live_.begin()->first);
    faults_.set_completion_lag(0, false);
    device_.complete_all();
    alloc_.clear_cache();
    check_all();
    const statistics s = alloc_.get_statistics();
    check(s.active_bytes == 0 && s.live_blocks == 0, "blocks live after freeing all");
    if (s.reserved_bytes != 0 || s.segments != 0) {
      std::string layout;
      for (const segment_view& v : alloc_.calculate_segments()) {
        layout += " [segment " + std::to_string(v.size) + (v.small ? " small:" : ":");
        for (const block_view& b : v.blocks)
          layout += " " + std::to_string(b.size) + (b.live ? "L" : "F");
        layout += "]";
      }
      check(false,
            "reserved " + std::to_string(s.reserved_bytes) + " bytes after clear_cache;" + layout);
    }
    const sim_counters d = device_.get_counters();
    check(d.reserved_bytes + d.page_bytes == s.reserved_bytes && d.mapped_bytes == 0,
          "the device still holds segments or pages");
  }

  // Every invariant the model can see.
  void check_all() {
    const statistics s = alloc_.get_statistics();
    // Walks everything and validates every invariant (as validate() would) on the way.
    const statistics counted = alloc_.calculate_statistics();
    check(counted == s, "calculate_statistics() differs from get_statistics()");
    check(s.active_bytes == active_, "active_bytes " + std::to_string(s.active_bytes) +
                                         " != model " + std::to_string(active_));
    check(s.requested_bytes == requested_, "requested_bytes differs from the model");
    check(s.live_blocks == live_.size(), "live_blocks differs from the model");
    if (exact_peaks) {
      check(s.peak_requested_bytes >= s.requested_bytes, "peak_requested_bytes below requested");
      check(s.peak_active_bytes == peak_active_, "peak_active_bytes differs from the model");
      check(s.peak_requested_bytes == peak_requested_, "peak_requested_bytes differs");
    } else {
      check(s.peak_active_bytes >= s.active_bytes, "peak_active_bytes below active_bytes");
      // peak_requested_bytes is not checked: it can fall below requested_bytes
      // (fuzz/known_bugs/api_peak_requested_below_model.bin).
      check(s.peak_active_bytes <= s.peak_reserved_bytes, "peak active above peak reserved");
    }
    check(s.allocations == allocations_, "allocations differs from the model");
    check(s.frees == frees_, "frees differs from the model");
    check(s.out_of_memory == oom_, "out_of_memory count differs from the model");
    check(s.cached_bytes == s.reserved_bytes - s.active_bytes, "cached != reserved - active");
    check(s.peak_reserved_bytes >= s.reserved_bytes, "peak reserved below reserved");
    const sim_counters d = device_.get_counters();
    const std::size_t held = d.reserved_bytes + d.page_bytes;
    check(held == s.reserved_bytes, "the device holds " + std::to_string(held) +
                                        " bytes, the allocator counts " +
                                        std::to_string(s.reserved_bytes));
    check(d.segment_allocs - d.segment_frees == s.segments, "segment count differs from device");
    check(s.backend_allocations == d.segment_allocs + d.pages_created,
          "backend_allocations differ from the device's segments and pages made");
    check(s.backend_frees == d.segment_frees + d.pages_released,
          "backend_frees differ from the device's segments and pages given back");
    if (++full_checks_ % 16 == 0) check_sizes();
  }

  std::size_t segment_size_for(std::size_t bytes) const {
    const device_facts& f = device_.get_facts();
    const std::size_t g = std::max<std::size_t>(f.granularity, 1);
    const std::size_t size = round_up_to(bytes, 512);
    std::size_t s = size <= (std::size_t{1} << 20) ? round_up_to(std::size_t{2} << 20, g)
                                                   : round_up_to(size, g);
    if (s > f.max_buffer) s = std::max(size, f.max_buffer);
    // An arena block need not start on a page: it may touch one page more (pages
    // are at least 4 KiB, src/allocator/arena.cpp).
    if (size > (std::size_t{1} << 20) && f.virtual_memory) s += round_up_to(4096, g);
    return s;
  }

  // Bytes of segments that hold a live block: no pressure can release them.
  std::size_t calculate_pinned_bytes() const {
    std::size_t bytes = 0;
    for (const segment_view& v : alloc_.calculate_segments()) {
      const bool live =
          std::any_of(v.blocks.begin(), v.blocks.end(), [](const block_view& b) { return b.live; });
      if (live) bytes += v.size;
    }
    return bytes;
  }

 private:
  template <class F>
  void expect_invalid(F&& call, const char* prefix) {
    bool thrown = false;
    try {
      call();
    } catch (const invalid_argument& e) {
      thrown = true;
      check(std::string(e.what()).rfind(prefix, 0) == 0,
            std::string("unclear message: ") + e.what());
    }
    check(thrown, std::string("a bad call to ") + prefix + " was accepted");
    counts_.invalid_argument++;
    check_all();
  }

  // A range freed behind unfinished work is not handed to another queue, unless that
  // queue's later work waits for it on the device.
  void check_fences(address_t address, std::size_t size, queue_id queue) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool done = true;
      const bool overlaps = it->address < address + size && address < it->address + it->size;
      for (const fence& f : it->fences) {
        const bool complete = device_.get_completed(f.queue) >= f.value;
        done = done && complete;
        check(!overlaps || complete || device_.is_ordered_after(queue, f),
              "a block freed behind unfinished work on queue " + std::to_string(f.queue) +
                  " was handed to queue " + std::to_string(queue));
      }
      it = done ? pending_.erase(it) : std::next(it);
    }
  }

  void check_sizes() {
    for (const auto& [address, b] : live_) {
      check(alloc_.get_size(address) == b.size, "get_size differs for a live block");
    }
  }

  sim_backend& device_;
  fault_injection_adaptor& faults_;
  allocator& alloc_;
  std::map<address_t, model_block> live_;
  std::vector<freed_range> pending_;
  std::size_t active_ = 0, requested_ = 0, peak_active_ = 0, peak_requested_ = 0;
  std::uint64_t allocations_ = 0, frees_ = 0, oom_ = 0, full_checks_ = 0;
  driver_counts counts_;
};

// What sizes the random allocations ask for: mixed, as a framework's traffic; or
// only sizes the large pool serves, so that an arena under its limits moves pages
// (and moves some back) far more often.
enum class traffic { mixed, large };

// One random API call, weighted like a framework's traffic: mostly allocations and
// frees of mixed sizes, some fences, now and then limits, clears and bad calls.
inline void run_random_call(api_driver& d, std::mt19937_64& rng, const device_facts& facts,
                            traffic sizes = traffic::mixed) {
  auto pick = [&](std::uint64_t n) { return n ? rng() % n : 0; };
  const auto queue = static_cast<queue_id>(pick(facts.queue_count));
  const auto& live = d.get_live();
  auto any_live = [&]() -> address_t {
    if (live.empty()) return 0;
    auto it = live.begin();
    std::advance(it, static_cast<long>(pick(std::min<std::size_t>(live.size(), 64))));
    return it->first;
  };
  const std::uint64_t r = pick(1000);
  if (r < 420) {
    const std::uint64_t kind = pick(10);
    std::size_t bytes = kind < 6   ? 1 + pick(64 << 10)                // small
                        : kind < 9 ? 1 + pick(std::size_t{1} << 20)    // up to the small limit
                                   : 1 + pick(std::size_t{12} << 20);  // large
    if (sizes == traffic::large) bytes = (std::size_t{1} << 20) + 1 + pick(std::size_t{11} << 20);
    if (pick(200) == 0) bytes = 0;
    if (pick(500) == 0) bytes = facts.max_buffer + 1 + pick(1000);  // too big: rejected
    d.allocate(bytes, queue);
  } else if (r < 800) {
    if (address_t a = any_live()) d.free(a);
  } else if (r < 840) {
    if (address_t a = any_live())
      d.record_use(a, static_cast<queue_id>(pick(facts.queue_count + 1)));
  } else if (r < 920) {
    d.submit(queue);
  } else if (r < 970) {
    d.complete(queue, pick(3));
  } else if (r < 978) {
    d.set_memory_limit((4 + pick(28)) * (std::size_t{2} << 20));
  } else if (r < 984) {
    d.set_cache_limit(pick(16) * (std::size_t{2} << 20));
  } else if (r < 988) {
    d.clear_cache();
  } else if (r < 992) {
    d.reset_peak();
  } else {
    const address_t a = any_live();
    d.free_bad(a ? a + 512 * (1 + pick(4)) : (address_t{1} << 44) + 512 * pick(4096));
  }
}

}  // namespace memkit::reliability

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
