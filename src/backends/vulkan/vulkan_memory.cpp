// The Vulkan backend's memory: device-local segments, host-visible staging
// buffers, and the map from memkit addresses to (buffer, offset).
#include <string>

#include "backends/vulkan/vulkan_state.hpp"
#include "common/helpers.hpp"
#include "memkit/errors.hpp"

namespace memkit {

namespace {

constexpr VkBufferUsageFlags kUsage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT;

VkBuffer create_buffer(VkDevice device, std::size_t bytes, const char* function) {
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = bytes;
  info.usage = kUsage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  check_vulkan(vkCreateBuffer(device, &info, nullptr, &buffer), function, "vkCreateBuffer");
  return buffer;
}

}  // namespace

std::uint32_t vulkan_backend::state::find_memory_type(std::uint32_t allowed,
                                                      VkMemoryPropertyFlags required,
                                                      VkMemoryPropertyFlags avoided) const {
  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(physical, &memory);
  std::uint32_t fallback = UINT32_MAX;
  for (std::uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = memory.memoryTypes[i].propertyFlags;
    if (!(allowed >> i & 1) || (f & required) != required) continue;
    if (!(f & avoided)) return i;
    if (fallback == UINT32_MAX) fallback = i;
  }
  return fallback;
}

void vulkan_backend::state::choose_memory_types() {
  // Every buffer here has the same usage, so one probe tells which types serve.
  VkBuffer probe = create_buffer(device, 4096, "vulkan_backend");
  VkMemoryRequirements requirements;
  vkGetBufferMemoryRequirements(device, probe, &requirements);
  vkDestroyBuffer(device, probe, nullptr);
  // Segments: device-local, preferably not host-visible (the fast memory of a
  // discrete GPU); on a CPU driver every type is both, which serves as well.
  segment_type = find_memory_type(requirements.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                  VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
  staging_type = find_memory_type(
      requirements.memoryTypeBits,
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0);
  if (segment_type == UINT32_MAX || staging_type == UINT32_MAX) {
    throw vulkan_unavailable(
        "[memkit::vulkan_backend] the device has no device-local or no host-visible coherent "
        "memory type for storage buffers");
  }
}

vulkan_staging vulkan_backend::state::create_staging(std::size_t bytes) {
  vulkan_staging staging;
  staging.size = bytes < 4 ? 4 : (bytes + 3) / 4 * 4;  // shaders read whole words
  staging.buffer = create_buffer(device, staging.size, "vulkan_backend::staging");
  VkMemoryRequirements requirements;
  vkGetBufferMemoryRequirements(device, staging.buffer, &requirements);
  VkMemoryAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  info.allocationSize = requirements.size;
  info.memoryTypeIndex = staging_type;
  VkResult result = vkAllocateMemory(device, &info, nullptr, &staging.memory);
  if (result == VK_SUCCESS) result = vkBindBufferMemory(device, staging.buffer, staging.memory, 0);
  if (result == VK_SUCCESS) {
    result = vkMapMemory(device, staging.memory, 0, VK_WHOLE_SIZE, 0, &staging.mapped);
  }
  if (result != VK_SUCCESS) {
    destroy_staging(staging);
    check_vulkan(result, "vulkan_backend::staging", "allocating a staging buffer");
  }
  return staging;
}

void vulkan_backend::state::destroy_staging(vulkan_staging& staging) noexcept {
  if (staging.buffer) vkDestroyBuffer(device, staging.buffer, nullptr);
  if (staging.memory) vkFreeMemory(device, staging.memory, nullptr);  // unmaps it
  staging = {};
}

std::pair<const vulkan_segment*, std::size_t> vulkan_backend::state::locate(
    address_t address, std::size_t bytes, const char* function) const {
  auto it = segments.upper_bound(address);
  if (it != segments.begin()) {
    --it;
    if (address + bytes <= it->first + it->second.size) {
      return {&it->second, address - it->first};
    }
  }
  throw invalid_argument(std::string("[memkit::vulkan_backend::") + function + "] " +
                         std::to_string(bytes) + " bytes at " + std::to_string(address) +
                         " are not inside one live segment");
}

address_t vulkan_backend::allocate_segment(std::size_t bytes) {
  if (bytes == 0 || bytes > facts_.max_buffer) return 0;
  state& s = *state_;
  vulkan_segment segment;
  segment.size = bytes;
  segment.buffer = create_buffer(s.device, bytes, "vulkan_backend::allocate_segment");
  VkMemoryRequirements requirements;
  vkGetBufferMemoryRequirements(s.device, segment.buffer, &requirements);
  VkMemoryAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  info.allocationSize = requirements.size;
  info.memoryTypeIndex = s.segment_type;
  VkResult result = vkAllocateMemory(s.device, &info, nullptr, &segment.memory);
  if (result == VK_SUCCESS)
    result = vkBindBufferMemory(s.device, segment.buffer, segment.memory, 0);
  if (result != VK_SUCCESS) {
    vkDestroyBuffer(s.device, segment.buffer, nullptr);
    if (segment.memory) vkFreeMemory(s.device, segment.memory, nullptr);
    // No room is the allocator's to handle (release the cache, wait, retry).
    if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY) return 0;
    check_vulkan(result, "vulkan_backend::allocate_segment", "vkAllocateMemory");
  }
  std::lock_guard lock(s.mutex);
  const address_t address = s.next_address;
  const std::size_t g = facts_.granularity;
  s.next_address += common::round_up(bytes, g) + g;
  s.segments.emplace(address, segment);
  return address;
}

void vulkan_backend::free_segment(address_t address, std::size_t bytes) {
  state& s = *state_;
  std::uint64_t last = 0;
  {
    std::lock_guard lock(s.mutex);
    auto it = s.segments.find(address);
    if (it == s.segments.end() || it->second.size != bytes) {
      throw invalid_argument("[memkit::vulkan_backend::free_segment] no segment of " +
                             std::to_string(bytes) + " bytes at this address");
    }
    last = s.submitted;
  }
  // Work already queued may still use the buffer: destroy it only after that.
  s.wait_for(last);
  std::lock_guard lock(s.mutex);
  auto it = s.segments.find(address);
  vkDestroyBuffer(s.device, it->second.buffer, nullptr);
  vkFreeMemory(s.device, it->second.memory, nullptr);
  s.segments.erase(it);
  s.reclaim();
}

}  // namespace memkit
