// The Vulkan backend's queue: every submission signals the next value of one
// timeline semaphore, so a memkit fence {0, value} is that semaphore reaching value.
#include <string>

#include "backends/vulkan/vulkan_state.hpp"
#include "memkit/errors.hpp"

namespace memkit {

std::uint64_t vulkan_backend::state::submit(const std::function<void(VkCommandBuffer)>& record,
                                            VkDescriptorSet set, vulkan_staging staging,
                                            bool to_host) {
  VkCommandBufferAllocateInfo allocate{};
  allocate.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  allocate.commandPool = command_pool;
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  check_vulkan(vkAllocateCommandBuffers(device, &allocate, &commands), "vulkan_backend::submit",
               "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vkBeginCommandBuffer(commands, &begin);
  // Order after everything earlier on the queue: its writes are visible to this
  // work, and this work's writes wait for its reads.
  constexpr VkPipelineStageFlags kStages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(commands, kStages, kStages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
  record(commands);
  if (to_host) {
    VkMemoryBarrier host{};
    host.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(commands, kStages, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &host, 0, nullptr, 0,
                         nullptr);
  }
  check_vulkan(vkEndCommandBuffer(commands), "vulkan_backend::submit", "vkEndCommandBuffer");

  const std::uint64_t value = submitted + 1;
  VkTimelineSemaphoreSubmitInfo timeline_info{};
  timeline_info.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
  timeline_info.signalSemaphoreValueCount = 1;
  timeline_info.pSignalSemaphoreValues = &value;
  VkSubmitInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  info.pNext = &timeline_info;
  info.commandBufferCount = 1;
  info.pCommandBuffers = &commands;
  info.signalSemaphoreCount = 1;
  info.pSignalSemaphores = &timeline;
  const VkResult result = vkQueueSubmit(queue, 1, &info, VK_NULL_HANDLE);
  if (result != VK_SUCCESS) {
    vkFreeCommandBuffers(device, command_pool, 1, &commands);
    check_vulkan(result, "vulkan_backend::submit", "vkQueueSubmit");
  }
  submitted = value;
  counters.submissions++;
  in_flight.push_back({value, commands, set, staging});
  return value;
}

std::uint64_t vulkan_backend::state::read_completed() const {
  std::uint64_t value = 0;
  check_vulkan(vkGetSemaphoreCounterValue(device, timeline, &value), "vulkan_backend",
               "vkGetSemaphoreCounterValue");
  return value;
}

void vulkan_backend::state::wait_for(std::uint64_t value) const {
  if (value == 0) return;
  VkSemaphoreWaitInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  info.semaphoreCount = 1;
  info.pSemaphores = &timeline;
  info.pValues = &value;
  check_vulkan(vkWaitSemaphores(device, &info, UINT64_MAX), "vulkan_backend::wait",
               "vkWaitSemaphores");
}

void vulkan_backend::state::reclaim() noexcept {
  std::uint64_t completed = 0;
  if (vkGetSemaphoreCounterValue(device, timeline, &completed) != VK_SUCCESS) return;
  while (!in_flight.empty() && in_flight.front().value <= completed) {
    vulkan_submission& done = in_flight.front();
    vkFreeCommandBuffers(device, command_pool, 1, &done.commands);
    if (done.descriptors) vkFreeDescriptorSets(device, descriptor_pool, 1, &done.descriptors);
    destroy_staging(done.staging);
    in_flight.pop_front();
  }
}

std::uint64_t vulkan_backend::get_submitted(queue_id queue) {
  if (queue != 0) {
    throw invalid_argument("[memkit::vulkan_backend::get_submitted] queue " +
                           std::to_string(queue) + " does not exist");
  }
  std::lock_guard lock(state_->mutex);
  return state_->submitted;
}

std::uint64_t vulkan_backend::get_completed(queue_id queue) const {
  if (queue != 0) {
    throw invalid_argument("[memkit::vulkan_backend::get_completed] queue " +
                           std::to_string(queue) + " does not exist");
  }
  return state_->read_completed();
}

void vulkan_backend::wait(fence f) {
  if (f.queue != 0) {
    throw invalid_argument("[memkit::vulkan_backend::wait] queue " + std::to_string(f.queue) +
                           " does not exist");
  }
  std::uint64_t value = f.value;
  {
    std::lock_guard lock(state_->mutex);
    if (value > state_->submitted) value = state_->submitted;  // nothing later exists
  }
  state_->wait_for(value);
  std::lock_guard lock(state_->mutex);
  state_->reclaim();
}

}  // namespace memkit
