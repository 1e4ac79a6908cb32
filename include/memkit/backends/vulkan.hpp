// vulkan: a discrete Vulkan 1.2 device. Segments are device-local buffers;
// transfers go through host-visible staging buffers; fill, copy and the bool
// conversion run as compute shaders (shaders/*.comp, embedded as SPIR-V); one
// timeline semaphore per queue is the fence. Built when cmake/vulkan.cmake finds
// Vulkan and glslangValidator (MEMKIT_HAVE_VULKAN).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "memkit/backend.hpp"
#include "memkit/device_data.hpp"

namespace memkit {

// No Vulkan 1.2 device with compute and timeline semaphores here; what() says why.
class vulkan_unavailable : public unavailable {
 public:
  using unavailable::unavailable;
};

// A Vulkan call failed.
class vulkan_error : public error {
 public:
  using error::error;
};

struct vulkan_options {
  // Enable VK_LAYER_KHRONOS_validation (where installed) and count what it reports.
  bool validation = false;
  // WebGPU's storage rules: a bool stored in 4 bytes, 256-byte binding offsets.
  bool webgpu_compatible = false;
  // Which physical device: -1 picks a discrete GPU, else an integrated one, else any.
  int device_index = -1;
  std::size_t granularity = std::size_t{64} << 10;  // segment sizes round up to this
};

struct vulkan_heap {
  std::size_t size = 0;
  std::size_t budget = 0;  // VK_EXT_memory_budget; the size where it is absent
  std::size_t usage = 0;   // VK_EXT_memory_budget; 0 where it is absent
  bool device_local = false;
};

struct vulkan_memory_type {
  std::uint32_t heap = 0;
  bool device_local = false;
  bool host_visible = false;
  bool host_coherent = false;
  bool host_cached = false;
};

struct vulkan_memory_report {
  std::vector<vulkan_heap> heaps;
  std::vector<vulkan_memory_type> types;
  bool has_budget = false;         // VK_EXT_memory_budget is on
  std::uint32_t segment_type = 0;  // the type segments are allocated from
  std::uint32_t staging_type = 0;  // the type staging buffers are allocated from
};

struct vulkan_limits {
  std::string device_name;
  std::string device_type;  // "discrete", "integrated", "virtual", "cpu", "other"
  std::uint32_t api_version = 0;
  std::uint32_t driver_version = 0;
  std::size_t max_storage_buffer_range = 0;             // the largest storage binding
  std::size_t min_storage_buffer_offset_alignment = 0;  // binding offsets are multiples
  std::size_t max_memory_allocation_size = 0;
  std::uint32_t max_compute_workgroups_x = 0;
};

struct vulkan_counters {
  std::uint64_t copies_to_device = 0;
  std::uint64_t copies_to_host = 0;
  std::size_t bytes_to_device = 0;  // device bytes written by uploads
  std::size_t bytes_to_host = 0;    // device bytes read by downloads
  std::uint64_t dispatches = 0;     // compute shaders run
  std::uint64_t submissions = 0;
  std::uint64_t segments = 0;  // live device buffers
};

class vulkan_backend final : public backend, public device_data {
 public:
  // Throws vulkan_unavailable when no suitable device is present.
  explicit vulkan_backend(vulkan_options options = {});
  ~vulkan_backend() override;
  vulkan_backend(const vulkan_backend&) = delete;
  vulkan_backend& operator=(const vulkan_backend&) = delete;

  const device_facts& get_facts() const noexcept override { return facts_; }
  address_t allocate_segment(std::size_t bytes) override;
  void free_segment(address_t address, std::size_t bytes) override;
  std::uint64_t get_submitted(queue_id queue) override;
  std::uint64_t get_completed(queue_id queue) const override;
  void wait(fence f) override;
  void copy_to_device(address_t dst, const void* src, std::size_t host_bytes, queue_id queue,
                      element_conversion conversion = element_conversion::none) override;
  void copy_to_host(void* dst, address_t src, std::size_t host_bytes, queue_id queue,
                    element_conversion conversion = element_conversion::none) override;
  void fill(address_t dst, std::size_t bytes, std::uint32_t pattern, queue_id queue) override;
  void copy(address_t dst, address_t src, std::size_t bytes, queue_id queue) override;
  bool follows_webgpu_rules() const noexcept override;  // vulkan_options::webgpu_compatible

  const vulkan_limits& get_limits() const noexcept;
  vulkan_memory_report calculate_memory_report() const;  // heaps' budgets read now
  vulkan_counters get_counters() const;

  // Validation: whether the layer is on, why not, and the warnings and errors it
  // reported (the first few kept as text).
  bool is_validation_on() const noexcept;
  std::string get_validation_note() const;
  std::uint64_t get_validation_messages() const noexcept;
  std::vector<std::string> get_validation_log() const;

 private:
  struct state;
  std::unique_ptr<state> state_;
  device_facts facts_;
};

}  // namespace memkit
