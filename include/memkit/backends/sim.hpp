// sim: a simulated discrete device. Host-side bookkeeping only: it never touches
// the memory it hands out. Tests and trace replays run on it, deterministically.
// With store_contents on, it also keeps what each segment holds, so transfers and
// kernels (fill, copy) are real round trips (src/backends/sim/sim_transfer.cpp).
// Several sims model several devices (sim_options::device): their addresses never
// overlap, peers can be granted access, and blocks can be exported and imported
// (bookkeeping only: src/backends/sim/sim_sharing.cpp).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "memkit/backend.hpp"
#include "memkit/capabilities.hpp"
#include "memkit/device_data.hpp"

namespace memkit {

struct sim_options {
  std::size_t capacity = std::size_t{80} << 30;    // bytes of device memory
  std::size_t granularity = std::size_t{2} << 20;  // segment and page size unit
  std::size_t max_buffer = 0;                      // 0: the capacity
  std::size_t alignment = 256;
  std::size_t max_wired = 0;  // 0: the capacity
  std::uint32_t queue_count = 4;
  // Fences complete only when told (complete()), or, when > 0, once this many
  // later submissions have been made on the same queue.
  std::uint32_t auto_complete_after = 0;
  // wait() on an unfinished fence: false completes it at once (the device "runs"
  // the work); true blocks until another thread calls complete().
  bool wait_blocks = false;
  bool virtual_memory = true;  // offer reserve / create / map / unmap
  bool queue_ordering = true;  // offer order_after (a queue's later work waits for a fence)
  // Simulated device cost per call, in nanoseconds, for reports (defaults: what
  // each CUDA call costs on an H200, ../shared/device-costs.md).
  std::uint64_t segment_alloc_ns = 60'000;
  std::uint64_t segment_free_ns = 30'000;
  std::uint64_t reserve_ns = 19'000;
  std::uint64_t create_page_ns = 9'800;
  std::uint64_t release_page_ns = 14'000;
  // A physical handle of several pages costs more to create and to give back: one
  // of 64 MiB was 271 us created, mapped and granted, 96 us unmapped and released,
  // against 41 us and 35 us for one page (H200); the difference is put on each page
  // past the first. On an H100 a 16-page handle cost about 7 us a page past the first,
  // mostly in the release, and larger ones less (docs/BENCHMARKS.md).
  std::uint64_t create_extra_page_ns = 7'400;
  std::uint64_t release_extra_page_ns = 2'000;
  std::uint64_t map_ns = 1'100;
  std::uint64_t set_access_ns = 30'000;  // for each mapping the call covers
  std::uint64_t unmap_ns = 21'000;
  std::uint64_t record_fence_ns = 220;  // cudaEventRecord
  std::uint64_t query_fence_ns = 170;   // cudaEventQuery
  std::uint64_t order_ns = 220;         // cudaStreamWaitEvent (not measured: taken as a record's)
  // Keep the contents of every segment in host memory so transfers and kernels
  // work; off, they throw. Off by default: replays of large traces stay cheap.
  bool store_contents = false;
  // The device's ordinal among several sims: names it "sim:N" (N > 0) and moves
  // its addresses, so that devices never share one.
  std::uint32_t device = 0;
  bool peer_access = true;  // other sims may be granted access to this one
};

// Counters of every backend call.
struct sim_counters {
  std::uint64_t segment_allocs = 0;
  std::uint64_t segment_frees = 0;
  std::uint64_t failed_allocs = 0;
  std::uint64_t waits = 0;
  std::uint64_t unfinished_waits = 0;  // waits on a fence not yet complete: the host stalls
  std::uint64_t fence_queries = 0;
  std::uint64_t fences_recorded = 0;  // get_submitted calls
  std::uint64_t orders = 0;           // order_after calls that made a queue wait on another
  std::size_t reserved_bytes = 0;
  std::size_t peak_reserved_bytes = 0;
  std::uint64_t ranges_reserved = 0;
  std::uint64_t pages_created = 0;
  std::uint64_t pages_released = 0;
  std::uint64_t maps = 0;
  std::uint64_t set_accesses = 0;
  std::uint64_t unmaps = 0;
  std::size_t page_bytes = 0;          // physical page bytes held now
  std::size_t mapped_bytes = 0;        // bytes mapped now
  std::uint64_t simulated_ns = 0;      // sum of the per-call costs
  std::uint64_t copies_to_device = 0;  // transfers (store_contents only)
  std::uint64_t copies_to_host = 0;
  std::size_t bytes_to_device = 0;  // device bytes written by those transfers
  std::size_t bytes_to_host = 0;    // device bytes read by them
  std::uint64_t kernels = 0;        // fill and copy calls
  std::uint64_t peers_granted = 0;  // grant_access calls that added a peer
  std::uint64_t exports = 0;        // export_memory calls
  std::uint64_t imports = 0;        // import_memory calls
  std::uint64_t imports_closed = 0;
};

class sim_backend final : public backend,
                          public device_data,
                          public peer_access,
                          public memory_sharing {
 public:
  explicit sim_backend(sim_options options = {});
  ~sim_backend() override;

  const device_facts& get_facts() const noexcept override { return facts_; }
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
  void copy_to_device(address_t dst, const void* src, std::size_t host_bytes, queue_id queue,
                      element_conversion conversion = element_conversion::none) override;
  void copy_to_host(void* dst, address_t src, std::size_t host_bytes, queue_id queue,
                    element_conversion conversion = element_conversion::none) override;
  void fill(address_t dst, std::size_t bytes, std::uint32_t pattern, queue_id queue) override;
  void copy(address_t dst, address_t src, std::size_t bytes, queue_id queue) override;
  // The physical page mapped at a granule-aligned address, 0 if none (for tests).
  page_id get_mapping(address_t at) const;

  // Peers: another sim may be granted access; granting re-sets access over every
  // mapped run, as CUDA must.
  bool can_grant_access(const backend& accessor) const override;
  void grant_access(backend& accessor) override;
  // Whether `device` (an ordinal) can reach the byte at `address` of this sim.
  bool is_accessible_from(address_t address, std::uint32_t device) const;
  std::uint32_t get_device() const noexcept { return options_.device; }

  // Sharing: a description holds the block's address; importing returns it.
  shared_memory export_memory(address_t address, std::size_t bytes) override;
  address_t import_memory(shared_memory& memory) override;
  void close_import(address_t address) override;
  std::size_t get_import_count() const;  // imports not yet closed

  // Test controls.
  std::uint64_t submit(queue_id queue);                // new work on the queue; returns its fence
  void complete(queue_id queue, std::uint64_t value);  // finish work up to value
  void complete_all();
  // Whether work submitted to `queue` from now on starts only after fence `f`: it
  // completed, is on the same queue, or `queue` was ordered after it (order_after),
  // also through other queues (ordered after a fence of a queue ordered after f).
  bool is_ordered_after(queue_id queue, fence f) const;
  void set_capacity(std::size_t bytes);  // change the simulated capacity
  sim_counters get_counters() const;
  std::size_t get_wired_limit() const;

 private:
  void check_queue(queue_id queue, const char* function) const;
  void note_held_locked();  // peak of segment and page bytes held
  // The stored bytes [address, address + bytes) of one live segment; caller holds mutex_.
  unsigned char* find_contents(address_t address, std::size_t bytes, const char* function);

  device_facts facts_;
  sim_options options_;
  mutable std::mutex mutex_;
  std::condition_variable completed_cv_;
  std::vector<std::uint64_t> submitted_;  // per queue
  std::vector<std::uint64_t> completed_;  // per queue
  // Per queue, its work ordered after other queues' fences, oldest first: work
  // after `from` (the wait itself, submitted as value from + 1, and all after it)
  // completes only once `after` has.
  struct ordering {
    std::uint64_t from;
    fence after;
  };
  std::vector<std::deque<ordering>> orderings_;
  std::vector<std::uint64_t> reached_;  // per queue: completed, but for its orderings
  // Completes `queue` up to `value`, or up to its first ordering still waiting
  // (with run_orderings, completes the fences it waits for first: a host wait).
  void complete_locked(queue_id queue, std::uint64_t value, bool run_orderings);
  // Whether fence `later` completes only after `f` (same queue, or through the
  // orderings before it, at most `depth` queues deep).
  bool covers_locked(fence later, fence f, std::uint32_t depth) const;
  std::map<address_t, std::size_t> segments_;
  struct range {
    address_t base;
    std::size_t bytes;
    // Mapped runs by offset in the range, one per map call (split by a partial
    // unmap): what is mapped costs host memory, not what is reserved.
    struct run {
      std::size_t bytes;
      page_id page;
    };
    std::map<std::size_t, run> mapped;
  };
  struct physical_page {
    std::size_t bytes = 0;     // 0 once released
    std::size_t mappings = 0;  // granules it is mapped at
  };
  range* find_range(address_t at, std::size_t bytes);
  // Whether [offset, offset + bytes) of r is mapped throughout.
  static bool is_mapped(const range& r, std::size_t offset, std::size_t bytes);
  bool is_held_locked(address_t address, std::size_t bytes) const;  // in a segment or mapped
  std::vector<range> ranges_;                                       // reserved address ranges
  std::vector<physical_page> pages_{1};  // by page id; id 0 is never used
  address_t next_address_;
  std::size_t wired_limit_ = 0;
  mutable sim_counters counters_;
  std::map<address_t, std::vector<unsigned char>> contents_;  // by segment base
  std::vector<std::uint32_t> peers_;                          // devices granted access
  std::map<address_t, std::size_t> imports_;                  // open imports by address
};

}  // namespace memkit
