// device_set: one allocator per device, a shared total limit, peer access.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>

#include "devices/budget_backend.hpp"
#include "memkit/capabilities.hpp"
#include "memkit/devices.hpp"
#include "memkit/errors.hpp"

namespace memkit {

struct device_set::state {
  std::vector<backend*> backends;
  devices_detail::shared_budget budget;
  std::vector<std::unique_ptr<devices_detail::budget_backend>> adaptors;
  std::vector<std::unique_ptr<allocator>> allocators;
  std::atomic<std::size_t> active{0};
  std::atomic<std::size_t> peak_active{0};
  mutable std::mutex peer_mutex;
  std::vector<bool> peer_enabled;  // [accessor * count + owner]

  std::uint32_t check_device(std::uint32_t device, const char* function) const {
    if (device >= backends.size()) {
      throw invalid_argument(std::string("[memkit::device_set::") + function + "] device " +
                             std::to_string(device) + " does not exist; there are " +
                             std::to_string(backends.size()));
    }
    return device;
  }
  std::string describe(std::uint32_t device) const {
    return "device " + std::to_string(device) + " (" + backends[device]->get_facts().name + ")";
  }
  void note_active(std::size_t bytes) {
    const std::size_t now = active.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t peak = peak_active.load(std::memory_order_relaxed);
    while (now > peak && !peak_active.compare_exchange_weak(peak, now)) {
    }
  }
};

device_set::device_set(std::span<backend* const> devices, device_set_options options)
    : state_(std::make_unique<state>()) {
  state& s = *state_;
  if (devices.empty()) throw invalid_argument("[memkit::device_set] no devices");
  s.budget.limit.store(options.total_memory_limit);
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i]) {
      throw invalid_argument("[memkit::device_set] device " + std::to_string(i) +
                             " is a null backend");
    }
    s.backends.push_back(devices[i]);
    s.adaptors.push_back(std::make_unique<devices_detail::budget_backend>(*devices[i], s.budget));
    s.allocators.push_back(std::make_unique<allocator>(*s.adaptors.back(), options.allocator));
  }
  s.peer_enabled.assign(devices.size() * devices.size(), false);
  for (std::size_t i = 0; i < devices.size(); ++i) s.peer_enabled[i * devices.size() + i] = true;
  if (options.peer_access) enable_all_peer_access();
}

device_set::~device_set() = default;

std::uint32_t device_set::get_device_count() const noexcept {
  return static_cast<std::uint32_t>(state_->backends.size());
}

backend& device_set::get_backend(std::uint32_t device) const {
  return *state_->backends[state_->check_device(device, "get_backend")];
}

allocator& device_set::get_allocator(std::uint32_t device) const {
  return *state_->allocators[state_->check_device(device, "get_allocator")];
}

device_allocation device_set::allocate(std::uint32_t device, std::size_t bytes, queue_id queue) {
  state& s = *state_;
  allocator& a = *s.allocators[s.check_device(device, "allocate")];
  std::uint64_t refusals = s.budget.refusals.load();
  allocation block;
  try {
    block = a.allocate(bytes, queue);
  } catch (const out_of_memory&) {
    if (s.budget.refusals.load() == refusals) throw;  // the device itself is full
    // The total limit said no: the other devices' caches may make room.
    for (std::uint32_t d = 0; d < s.allocators.size(); ++d) {
      if (d != device) s.allocators[d]->clear_cache();
    }
    refusals = s.budget.refusals.load();
    try {
      block = a.allocate(bytes, queue);
    } catch (const out_of_memory& again) {
      if (s.budget.refusals.load() == refusals) throw;
      throw out_of_memory(
          "[memkit::device_set::allocate] " + s.describe(device) + ": " + std::to_string(bytes) +
              " bytes do not fit the total memory limit of " +
              std::to_string(s.budget.limit.load()) + " bytes (held on all devices: " +
              std::to_string(s.budget.held.load()) + "); " + again.what(),
          again.get_details());
    }
  }
  s.note_active(block.size);
  return {device, block.address, block.size};
}

void device_set::free(const device_allocation& allocation) {
  free(allocation.device, allocation.address);
}

void device_set::free(std::uint32_t device, address_t address) {
  state& s = *state_;
  allocator& a = *s.allocators[s.check_device(device, "free")];
  if (address == 0) return;
  const std::size_t size = a.get_size(address);  // throws for an unknown address
  a.free(address);
  s.active.fetch_sub(size, std::memory_order_relaxed);
}

void device_set::record_use(const device_allocation& allocation, queue_id queue) {
  get_allocator(allocation.device).record_use(allocation.address, queue);
}

std::size_t device_set::set_memory_limit(std::uint32_t device, std::size_t bytes) {
  return get_allocator(device).set_memory_limit(bytes);
}

std::size_t device_set::get_memory_limit(std::uint32_t device) const {
  return get_allocator(device).get_memory_limit();
}

std::size_t device_set::set_total_memory_limit(std::size_t bytes) {
  return state_->budget.limit.exchange(bytes);
}

std::size_t device_set::get_total_memory_limit() const noexcept {
  return state_->budget.limit.load();
}

statistics device_set::get_statistics(std::uint32_t device) const {
  return get_allocator(device).get_statistics();
}

statistics device_set::get_total_statistics() const {
  const state& s = *state_;
  statistics total;
  for (const auto& a : s.allocators) {
    add_counters(total, a->get_statistics());
  }
  total.peak_active_bytes = std::max(s.peak_active.load(), total.active_bytes);
  total.peak_reserved_bytes = std::max(s.budget.peak_held.load(), total.reserved_bytes);
  return total;
}

std::size_t device_set::get_total_held_bytes() const noexcept { return state_->budget.held.load(); }

void device_set::reset_peak() {
  state& s = *state_;
  for (const auto& a : s.allocators) a->reset_peak();
  s.peak_active.store(s.active.load());
  s.budget.peak_held.store(s.budget.held.load());
}

void device_set::clear_cache() {
  for (const auto& a : state_->allocators) a->clear_cache();
}

bool device_set::can_access_peer(std::uint32_t accessor, std::uint32_t owner) const {
  const state& s = *state_;
  s.check_device(accessor, "can_access_peer");
  s.check_device(owner, "can_access_peer");
  if (accessor == owner) return true;
  const auto* peers = find_capability<peer_access>(*s.backends[owner]);
  return peers && peers->can_grant_access(*s.backends[accessor]);
}

void device_set::enable_peer_access(std::uint32_t accessor, std::uint32_t owner) {
  state& s = *state_;
  s.check_device(accessor, "enable_peer_access");
  s.check_device(owner, "enable_peer_access");
  if (accessor == owner) return;
  auto* peers = find_capability<peer_access>(*s.backends[owner]);
  if (!peers) {
    throw invalid_argument("[memkit::device_set::enable_peer_access] " + s.describe(owner) +
                           " has no peer access (its backend does not implement "
                           "memkit::peer_access)");
  }
  if (!peers->can_grant_access(*s.backends[accessor])) {
    throw invalid_argument("[memkit::device_set::enable_peer_access] " + s.describe(accessor) +
                           " cannot reach the memory of " + s.describe(owner));
  }
  peers->grant_access(*s.backends[accessor]);
  std::lock_guard lock(s.peer_mutex);
  s.peer_enabled[accessor * s.backends.size() + owner] = true;
}

bool device_set::is_peer_access_enabled(std::uint32_t accessor, std::uint32_t owner) const {
  const state& s = *state_;
  s.check_device(accessor, "is_peer_access_enabled");
  s.check_device(owner, "is_peer_access_enabled");
  std::lock_guard lock(s.peer_mutex);
  return s.peer_enabled[accessor * s.backends.size() + owner];
}

std::size_t device_set::enable_all_peer_access() {
  std::size_t enabled = 0;
  const std::uint32_t count = get_device_count();
  for (std::uint32_t a = 0; a < count; ++a) {
    for (std::uint32_t o = 0; o < count; ++o) {
      if (a == o || !can_access_peer(a, o)) continue;
      enable_peer_access(a, o);
      ++enabled;
    }
  }
  return enabled;
}

}  // namespace memkit
