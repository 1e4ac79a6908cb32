// Several devices behind one API: one memkit::allocator per device, statistics and
// limits per device and in total, and peer access between devices when asked.
//
//   device_set   owns one allocator per device (the backends stay the caller's).
//                allocate(device, bytes, queue) and free(allocation) go to that
//                device's allocator; nothing is shared between devices but the
//                total limit.
//   total limit  each device's allocator sees its backend through an adaptor that
//                counts the bytes every device holds (segments and physical pages)
//                and refuses a segment or page that would take the sum above the
//                total limit. The allocator then treats the device as full (it
//                releases its own cache, waits for queued work, retries); if it
//                still fails, the set releases the other devices' caches and tries
//                once more before throwing out_of_memory naming the total limit.
//                The check is one atomic claim: exact under concurrency, no lock.
//   peers        a backend that offers peer_access (memkit/capabilities.hpp) can
//                make its memory reachable from another device of its kind.
//                enable_peer_access(a, o) lets device a read and write device o's
//                memory, present and future (CUDA: cudaDeviceEnablePeerAccess for
//                cudaMalloc segments, and cuMemSetAccess for a's location on o's
//                mapped virtual memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "memkit/allocator.hpp"
#include "memkit/capabilities.hpp"
#include "memkit/statistics.hpp"

namespace memkit {

// What device_set::allocate hands out.
struct device_allocation {
  std::uint32_t device = 0;
  address_t address = 0;
  std::size_t size = 0;
};

struct device_set_options {
  allocator_options allocator;         // every device's; memory_limit 0: its capacity
  std::size_t total_memory_limit = 0;  // bytes held on all devices together; 0: none
  bool peer_access = false;            // grant every pair that can, at construction
};

class device_set {
 public:
  // One allocator per backend, in order: device i is devices[i]. The backends must
  // outlive the set. Throws invalid_argument for an empty list or a null backend.
  explicit device_set(std::span<backend* const> devices, device_set_options options = {});
  ~device_set();  // gives every segment back; live blocks are forgotten
  device_set(const device_set&) = delete;
  device_set& operator=(const device_set&) = delete;

  std::uint32_t get_device_count() const noexcept;
  backend& get_backend(std::uint32_t device) const;  // the caller's backend
  allocator& get_allocator(std::uint32_t device) const;

  // A block of at least `bytes` on `device`, usable on `queue` of that device.
  // Throws invalid_argument for an unknown device, out_of_memory as the allocator
  // does (or naming the total limit when that is what ran out).
  device_allocation allocate(std::uint32_t device, std::size_t bytes, queue_id queue = 0);
  void free(const device_allocation& allocation);
  void free(std::uint32_t device, address_t address);
  // The block is also used by work on `queue` of its device (allocator::record_use).
  void record_use(const device_allocation& allocation, queue_id queue);

  // Limits. Per device: the allocator's memory limit. Total: see above. Each
  // setter returns the previous value.
  std::size_t set_memory_limit(std::uint32_t device, std::size_t bytes);
  std::size_t get_memory_limit(std::uint32_t device) const;
  std::size_t set_total_memory_limit(std::size_t bytes);  // 0: none
  std::size_t get_total_memory_limit() const noexcept;

  // Statistics of one device (its allocator's counters), and of all together:
  // every field summed, except peak_active_bytes and peak_reserved_bytes, which are
  // the peaks of the sums (kept by the set), and peak_requested_bytes, which is the
  // sum of the devices' peaks (an upper bound of the peak of the sum).
  statistics get_statistics(std::uint32_t device) const;
  statistics get_total_statistics() const;
  std::size_t get_total_held_bytes() const noexcept;  // segments and pages, all devices
  void reset_peak();
  void clear_cache();

  // Peer access: `accessor` may read and write `owner`'s memory.
  bool can_access_peer(std::uint32_t accessor, std::uint32_t owner) const;
  void enable_peer_access(std::uint32_t accessor, std::uint32_t owner);
  bool is_peer_access_enabled(std::uint32_t accessor, std::uint32_t owner) const;
  // Every ordered pair that can; returns the number of pairs enabled.
  std::size_t enable_all_peer_access();

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace memkit
