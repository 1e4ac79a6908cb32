// The adaptor through which each allocator of a device_set sees its backend: it
// forwards every call and counts the bytes all devices hold (segments and physical
// pages) against one shared budget, refusing a segment or page that would take the
// sum above the total limit. A refusal looks to the allocator like a full device.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "memkit/backend.hpp"
#include "memkit/device_data.hpp"

namespace memkit::devices_detail {

// What every device of a set shares. limit 0: none.
struct shared_budget {
  std::atomic<std::size_t> held{0};
  std::atomic<std::size_t> peak_held{0};
  std::atomic<std::size_t> limit{0};
  std::atomic<std::uint64_t> refusals{0};

  bool claim(std::size_t bytes);  // false (and counted) above the limit
  void give_back(std::size_t bytes) { held.fetch_sub(bytes, std::memory_order_relaxed); }
};

class budget_backend final : public forwarded_memory, public forwarded_data {
 public:
  budget_backend(backend& upstream, shared_budget& budget)
      : forwarded_memory(upstream), forwarded_data(upstream), budget_(budget) {}

  address_t allocate_segment(std::size_t bytes) override;
  void free_segment(address_t address, std::size_t bytes) override;
  page_id create_page(std::size_t bytes) override;
  void release_page(page_id page, std::size_t bytes) override;

 private:
  shared_budget& budget_;
};

}  // namespace memkit::devices_detail
