// The Vulkan backend's device: instance, validation messenger, the physical device
// and its facts, limits and memory report; construction and teardown.
#include <algorithm>
#include <cstring>
#include <string>

#include "backends/vulkan/vulkan_state.hpp"
#include "memkit/errors.hpp"

namespace memkit {

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";
constexpr std::size_t kLoggedMessages = 16;

bool has_layer(const char* name) {
  std::uint32_t count = 0;
  if (vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateInstanceLayerProperties(&count, layers.data());
  return std::any_of(layers.begin(), layers.end(), [&](const VkLayerProperties& l) {
    return std::strcmp(l.layerName, name) == 0;
  });
}

const char* get_type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

int get_preference(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 3;
    default:
      return 4;
  }
}

// Why a physical device cannot serve, or "" when it can; sets the compute family.
std::string check_device(VkPhysicalDevice physical, std::uint32_t& family) {
  VkPhysicalDeviceProperties properties;
  vkGetPhysicalDeviceProperties(physical, &properties);
  if (properties.apiVersion < VK_API_VERSION_1_2) return "below Vulkan 1.2";
  VkPhysicalDeviceVulkan12Features features12{};
  features12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &features12;
  vkGetPhysicalDeviceFeatures2(physical, &features);
  if (!features12.timelineSemaphore) return "no timeline semaphores";
  std::uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, families.data());
  for (std::uint32_t i = 0; i < count; ++i) {
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      family = i;
      return "";
    }
  }
  return "no compute queue";
}

}  // namespace

VKAPI_ATTR VkBool32 VKAPI_CALL vulkan_backend::state::count_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* s = static_cast<state*>(user);
  s->validation_messages++;
  std::lock_guard lock(s->log_mutex);
  if (s->validation_log.size() < kLoggedMessages) {
    s->validation_log.emplace_back(data && data->pMessage ? data->pMessage : "(no text)");
  }
  return VK_FALSE;
}

VkDebugUtilsMessengerCreateInfoEXT vulkan_backend::state::describe_messenger() {
  VkDebugUtilsMessengerCreateInfoEXT info{};
  info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  info.pfnUserCallback = count_message;
  info.pUserData = this;
  return info;
}

void vulkan_backend::state::create_instance() {
  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  if (options.validation) {
    if (has_layer(kValidationLayer)) {
      layers.push_back(kValidationLayer);
      extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
      validation_on = true;
    } else {
      validation_note = std::string(kValidationLayer) + " is not installed";
    }
  } else {
    validation_note = "validation was not asked for";
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "memkit";
  app.pEngineName = "memkit";
  app.apiVersion = VK_API_VERSION_1_2;
  VkDebugUtilsMessengerCreateInfoEXT messenger_info = describe_messenger();
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<std::uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  if (validation_on) info.pNext = &messenger_info;  // also hears instance creation
  const VkResult result = vkCreateInstance(&info, nullptr, &instance);
  if (result != VK_SUCCESS) {
    throw vulkan_unavailable(std::string("[memkit::vulkan_backend] vkCreateInstance failed: ") +
                             get_result_name(result));
  }
  if (validation_on) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
    if (create)
      check_vulkan(create(instance, &messenger_info, nullptr, &messenger), "vulkan_backend",
                   "vkCreateDebugUtilsMessengerEXT");
  }
}

void vulkan_backend::state::choose_device() {
  std::uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  vkEnumeratePhysicalDevices(instance, &count, devices.data());
  if (count == 0) throw vulkan_unavailable("[memkit::vulkan_backend] no Vulkan device found");
  std::string reasons;
  int best = -1;
  int best_preference = 1 << 30;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (options.device_index >= 0 && static_cast<std::uint32_t>(options.device_index) != i)
      continue;
    std::uint32_t family = 0;
    const std::string why = check_device(devices[i], family);
    VkPhysicalDeviceProperties properties;
    vkGetPhysicalDeviceProperties(devices[i], &properties);
    if (!why.empty()) {
      reasons += std::string(reasons.empty() ? "" : "; ") + properties.deviceName + ": " + why;
      continue;
    }
    const int preference = get_preference(properties.deviceType);
    if (preference < best_preference) {
      best = static_cast<int>(i);
      best_preference = preference;
      queue_family = family;
    }
  }
  if (best < 0) {
    throw vulkan_unavailable("[memkit::vulkan_backend] no usable Vulkan device (" +
                             (reasons.empty() ? "device index out of range" : reasons) + ")");
  }
  physical = devices[static_cast<std::size_t>(best)];

  VkPhysicalDeviceMaintenance3Properties maintenance3{};
  maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  VkPhysicalDeviceProperties2 properties{};
  properties.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties.pNext = &maintenance3;
  vkGetPhysicalDeviceProperties2(physical, &properties);
  const VkPhysicalDeviceLimits& l = properties.properties.limits;
  limits.device_name = properties.properties.deviceName;
  limits.device_type = get_type_name(properties.properties.deviceType);
  limits.api_version = properties.properties.apiVersion;
  limits.driver_version = properties.properties.driverVersion;
  limits.max_storage_buffer_range = l.maxStorageBufferRange;
  limits.min_storage_buffer_offset_alignment = l.minStorageBufferOffsetAlignment;
  limits.max_memory_allocation_size = maintenance3.maxMemoryAllocationSize;
  limits.max_compute_workgroups_x = l.maxComputeWorkGroupCount[0];
}

void vulkan_backend::state::create_device() {
  std::uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> available(count);
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, available.data());
  std::vector<const char*> extensions;
  for (const VkExtensionProperties& e : available) {
    if (std::strcmp(e.extensionName, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME) == 0) {
      extensions.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
      has_budget = true;
    }
  }
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{};
  queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue_info.queueFamilyIndex = queue_family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan12Features features12{};
  features12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  features12.timelineSemaphore = VK_TRUE;
  VkDeviceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.pNext = &features12;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue_info;
  info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  check_vulkan(vkCreateDevice(physical, &info, nullptr, &device), "vulkan_backend",
               "vkCreateDevice");
  vkGetDeviceQueue(device, queue_family, 0, &queue);

  VkSemaphoreTypeCreateInfo type_info{};
  type_info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
  type_info.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type_info.initialValue = 0;
  VkSemaphoreCreateInfo semaphore_info{};
  semaphore_info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
  semaphore_info.pNext = &type_info;
  check_vulkan(vkCreateSemaphore(device, &semaphore_info, nullptr, &timeline), "vulkan_backend",
               "vkCreateSemaphore");

  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pool_info.queueFamilyIndex = queue_family;
  check_vulkan(vkCreateCommandPool(device, &pool_info, nullptr, &command_pool), "vulkan_backend",
               "vkCreateCommandPool");
}

device_facts vulkan_backend::state::describe() const {
  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(physical, &memory);
  const std::size_t heap = memory.memoryHeaps[memory.memoryTypes[segment_type].heapIndex].size;
  const std::size_t granularity = std::max<std::size_t>(options.granularity, 4096);
  std::size_t largest =
      std::min({limits.max_storage_buffer_range, heap,
                limits.max_memory_allocation_size ? limits.max_memory_allocation_size
                                                  : limits.max_storage_buffer_range});
  largest = largest / granularity * granularity;  // a rounded-up request still fits
  device_facts facts;
  facts.name = "vulkan:" + limits.device_name;
  facts.capacity = heap;
  facts.granularity = granularity;
  facts.max_buffer = largest;
  facts.alignment = std::max<std::size_t>(256, limits.min_storage_buffer_offset_alignment);
  facts.max_wired = heap;
  facts.queue_count = 1;
  facts.unified = false;
  facts.virtual_memory = false;
  return facts;
}

void vulkan_backend::state::destroy() noexcept {
  if (device) {
    vkDeviceWaitIdle(device);
    reclaim();
    for (auto& [address, segment] : segments) {
      vkDestroyBuffer(device, segment.buffer, nullptr);
      vkFreeMemory(device, segment.memory, nullptr);
    }
    segments.clear();
    for (VkPipeline p : pipelines)
      if (p) vkDestroyPipeline(device, p, nullptr);
    if (pipeline_layout) vkDestroyPipelineLayout(device, pipeline_layout, nullptr);
    if (set_layout) vkDestroyDescriptorSetLayout(device, set_layout, nullptr);
    if (descriptor_pool) vkDestroyDescriptorPool(device, descriptor_pool, nullptr);
    if (command_pool) vkDestroyCommandPool(device, command_pool, nullptr);
    if (timeline) vkDestroySemaphore(device, timeline, nullptr);
    vkDestroyDevice(device, nullptr);
    device = VK_NULL_HANDLE;
  }
  if (messenger) {
    auto destroy_messenger = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy_messenger) destroy_messenger(instance, messenger, nullptr);
    messenger = VK_NULL_HANDLE;
  }
  if (instance) vkDestroyInstance(instance, nullptr);
  instance = VK_NULL_HANDLE;
}

vulkan_backend::vulkan_backend(vulkan_options options) : state_(std::make_unique<state>()) {
  state_->options = options;
  try {
    state_->create_instance();
    state_->choose_device();
    state_->create_device();
    state_->choose_memory_types();
    state_->create_pipelines();
  } catch (...) {
    state_->destroy();
    throw;
  }
  facts_ = state_->describe();
  // Segment addresses: aligned to the granularity, with a gap so no two touch.
  state_->next_address = address_t{1} << 40;
}

vulkan_backend::~vulkan_backend() { state_->destroy(); }

const vulkan_limits& vulkan_backend::get_limits() const noexcept { return state_->limits; }

vulkan_memory_report vulkan_backend::calculate_memory_report() const {
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{};
  budget.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
  VkPhysicalDeviceMemoryProperties2 memory{};
  memory.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2;
  if (state_->has_budget) memory.pNext = &budget;
  vkGetPhysicalDeviceMemoryProperties2(state_->physical, &memory);
  const VkPhysicalDeviceMemoryProperties& m = memory.memoryProperties;
  vulkan_memory_report report;
  report.has_budget = state_->has_budget;
  report.segment_type = state_->segment_type;
  report.staging_type = state_->staging_type;
  for (std::uint32_t i = 0; i < m.memoryHeapCount; ++i) {
    vulkan_heap heap;
    heap.size = m.memoryHeaps[i].size;
    heap.device_local = m.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
    heap.budget = state_->has_budget ? budget.heapBudget[i] : heap.size;
    heap.usage = state_->has_budget ? budget.heapUsage[i] : 0;
    report.heaps.push_back(heap);
  }
  for (std::uint32_t i = 0; i < m.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = m.memoryTypes[i].propertyFlags;
    vulkan_memory_type type;
    type.heap = m.memoryTypes[i].heapIndex;
    type.device_local = f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    type.host_visible = f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
    type.host_coherent = f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    type.host_cached = f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    report.types.push_back(type);
  }
  return report;
}

vulkan_counters vulkan_backend::get_counters() const {
  std::lock_guard lock(state_->mutex);
  vulkan_counters c = state_->counters;
  c.segments = state_->segments.size();
  return c;
}

bool vulkan_backend::is_validation_on() const noexcept { return state_->validation_on; }
std::string vulkan_backend::get_validation_note() const { return state_->validation_note; }
bool vulkan_backend::follows_webgpu_rules() const noexcept {
  return state_->options.webgpu_compatible;
}

std::uint64_t vulkan_backend::get_validation_messages() const noexcept {
  return state_->validation_messages.load();
}
std::vector<std::string> vulkan_backend::get_validation_log() const {
  std::lock_guard lock(state_->log_mutex);
  return state_->validation_log;
}

void check_vulkan(VkResult result, const char* function, const char* call) {
  if (result != VK_SUCCESS) {
    throw vulkan_error(std::string("[memkit::") + function + "] " + call +
                       " failed: " + get_result_name(result));
  }
}

const char* get_result_name(VkResult result) {
  switch (result) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
      return "another VkResult";
  }
}

}  // namespace memkit
