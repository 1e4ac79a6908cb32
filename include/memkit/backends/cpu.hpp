// cpu: host memory as a unified-memory device. Host and device views are one
// pointer; queues run synchronously, so every fence is complete when made.
#pragma once

#include "memkit/backend.hpp"
#include "memkit/device_data.hpp"

namespace memkit {

class cpu_backend final : public backend, public device_data {
 public:
  cpu_backend();
  const device_facts& get_facts() const noexcept override { return facts_; }
  address_t allocate_segment(std::size_t bytes) override;
  void free_segment(address_t address, std::size_t bytes) override;
  std::uint64_t get_submitted(queue_id) override { return 0; }
  std::uint64_t get_completed(queue_id) const override { return 0; }
  void wait(fence) override {}
  void* get_host_pointer(address_t address) const override {
    return reinterpret_cast<void*>(address);
  }

 private:
  device_facts facts_;
};

}  // namespace memkit
