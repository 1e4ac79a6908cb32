// The Vulkan backend's state, shared by its files: device (vulkan_device.cpp),
// memory (vulkan_memory.cpp), submission and fences (vulkan_queue.cpp), kernels
// and transfers (vulkan_kernels.cpp).
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "memkit/backends/vulkan.hpp"

namespace memkit {

// Throws vulkan_error "[memkit::vulkan_backend::<function>] <call> failed: <result>".
void check_vulkan(VkResult result, const char* function, const char* call);
const char* get_result_name(VkResult result);

enum class vulkan_kernel : std::uint32_t { fill, copy, bool_widen, bool_narrow, count };

struct vulkan_segment {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  std::size_t size = 0;
};

// A host-visible buffer, mapped for its whole life.
struct vulkan_staging {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
  std::size_t size = 0;
};

// Work submitted and not yet known complete: what to free once it is.
struct vulkan_submission {
  std::uint64_t value = 0;  // the timeline value it signals
  VkCommandBuffer commands = VK_NULL_HANDLE;
  VkDescriptorSet descriptors = VK_NULL_HANDLE;
  vulkan_staging staging;  // freed with it, unless the caller reads it first
};

struct vulkan_backend::state {
  vulkan_options options;
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  std::uint32_t queue_family = 0;
  VkSemaphore timeline = VK_NULL_HANDLE;  // the fence of queue 0
  VkCommandPool command_pool = VK_NULL_HANDLE;
  VkDescriptorPool descriptor_pool = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout = VK_NULL_HANDLE;
  std::array<VkPipeline, static_cast<std::size_t>(vulkan_kernel::count)> pipelines{};
  std::uint32_t segment_type = 0;
  std::uint32_t staging_type = 0;
  bool has_budget = false;
  vulkan_limits limits;

  // Validation messages (the messenger may call from any thread).
  bool validation_on = false;
  std::string validation_note;
  std::atomic<std::uint64_t> validation_messages{0};
  mutable std::mutex log_mutex;
  std::vector<std::string> validation_log;

  // Guards what follows and the queue (Vulkan wants queue submission serialized).
  mutable std::mutex mutex;
  std::uint64_t submitted = 0;
  std::map<address_t, vulkan_segment> segments;  // by address
  address_t next_address = 0;
  std::deque<vulkan_submission> in_flight;
  vulkan_counters counters;

  // vulkan_device.cpp
  // The messenger's callback counts what validation reports, into this state.
  static VKAPI_ATTR VkBool32 VKAPI_CALL
  count_message(VkDebugUtilsMessageSeverityFlagBitsEXT, VkDebugUtilsMessageTypeFlagsEXT,
                const VkDebugUtilsMessengerCallbackDataEXT* data, void* user);
  VkDebugUtilsMessengerCreateInfoEXT describe_messenger();
  void create_instance();
  void choose_device();
  void create_device();
  device_facts describe() const;
  void destroy() noexcept;

  // vulkan_memory.cpp; callers hold mutex where noted.
  std::uint32_t find_memory_type(std::uint32_t allowed, VkMemoryPropertyFlags required,
                                 VkMemoryPropertyFlags avoided) const;
  void choose_memory_types();
  vulkan_staging create_staging(std::size_t bytes);
  void destroy_staging(vulkan_staging& staging) noexcept;
  // The segment holding [address, address + bytes) and the offset in it; mutex held.
  std::pair<const vulkan_segment*, std::size_t> locate(address_t address, std::size_t bytes,
                                                       const char* function) const;

  // vulkan_queue.cpp; mutex held.
  // Records `record` into a fresh command buffer between barriers and submits it,
  // signalling the next timeline value (returned). `to_host` makes its writes
  // visible to the host once the value completes.
  std::uint64_t submit(const std::function<void(VkCommandBuffer)>& record, VkDescriptorSet set,
                       vulkan_staging staging, bool to_host);
  void reclaim() noexcept;  // frees what completed submissions held
  std::uint64_t read_completed() const;
  void wait_for(std::uint64_t value) const;

  // vulkan_kernels.cpp
  void create_pipelines();
  VkDescriptorSet bind(VkBuffer dst, std::size_t dst_offset, std::size_t dst_bytes, VkBuffer src,
                       std::size_t src_offset, std::size_t src_bytes);  // mutex held
  void dispatch(VkCommandBuffer commands, vulkan_kernel kernel, VkDescriptorSet set,
                std::uint32_t items, std::uint32_t first, std::uint32_t second) const;
};

}  // namespace memkit
