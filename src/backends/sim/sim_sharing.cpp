// The simulated device among several: peer access and sharing blocks with other
// processes, as bookkeeping (nothing is mapped; an import is the exporter's address).
#include <algorithm>
#include <string>

#include "memkit/backends/sim.hpp"
#include "memkit/errors.hpp"

namespace memkit {

bool sim_backend::is_held_locked(address_t address, std::size_t bytes) const {
  auto segment = segments_.upper_bound(address);
  if (segment != segments_.begin()) {
    --segment;
    if (address >= segment->first && address + bytes <= segment->first + segment->second) {
      return true;
    }
  }
  for (const range& r : ranges_) {
    if (address < r.base || address + bytes > r.base + r.bytes) continue;
    return is_mapped(r, address - r.base, bytes);
  }
  return false;
}

bool sim_backend::can_grant_access(const backend& accessor) const {
  const auto* peer = dynamic_cast<const sim_backend*>(&accessor);
  return peer && (peer == this || options_.peer_access);
}

void sim_backend::grant_access(backend& accessor) {
  if (!can_grant_access(accessor)) {
    throw invalid_argument("[memkit::sim_backend::grant_access] " + accessor.get_facts().name +
                           " cannot be granted access to " + facts_.name);
  }
  const std::uint32_t device = static_cast<const sim_backend&>(accessor).options_.device;
  std::lock_guard lock(mutex_);
  if (device == options_.device || std::ranges::find(peers_, device) != peers_.end()) return;
  peers_.push_back(device);
  counters_.peers_granted++;
  // Mapped virtual memory needs its access set again for the new peer, run by run.
  for (const range& r : ranges_) {
    std::size_t previous_end = ~std::size_t{0};
    for (const auto& [offset, run] : r.mapped) {
      if (offset != previous_end) {
        counters_.set_accesses++;
        counters_.simulated_ns += options_.set_access_ns;
      }
      previous_end = offset + run.bytes;
    }
  }
}

bool sim_backend::is_accessible_from(address_t address, std::uint32_t device) const {
  std::lock_guard lock(mutex_);
  if (device != options_.device && std::ranges::find(peers_, device) == peers_.end()) return false;
  return is_held_locked(address, 1);
}

shared_memory sim_backend::export_memory(address_t address, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes == 0 || !is_held_locked(address, bytes)) {
    throw invalid_argument("[memkit::sim_backend::export_memory] " + std::to_string(bytes) +
                           " bytes at " + std::to_string(address) + " are not held by " +
                           facts_.name);
  }
  counters_.exports++;
  shared_memory memory;
  memory.type = shared_memory::kind::sim;
  memory.device = options_.device;
  memory.size = bytes;
  memory.address = address;
  return memory;
}

address_t sim_backend::import_memory(shared_memory& memory) {
  memory.close_fds();
  if (memory.type != shared_memory::kind::sim || memory.address == 0) {
    throw invalid_argument("[memkit::sim_backend::import_memory] " + facts_.name +
                           " imports only sim descriptions");
  }
  std::lock_guard lock(mutex_);
  imports_[memory.address]++;
  counters_.imports++;
  return memory.address;
}

void sim_backend::close_import(address_t address) {
  std::lock_guard lock(mutex_);
  auto it = imports_.find(address);
  if (it == imports_.end()) {
    throw invalid_argument("[memkit::sim_backend::close_import] nothing imported at " +
                           std::to_string(address));
  }
  if (--it->second == 0) imports_.erase(it);
  counters_.imports_closed++;
}

std::size_t sim_backend::get_import_count() const {
  std::lock_guard lock(mutex_);
  std::size_t count = 0;
  for (const auto& entry : imports_) count += entry.second;
  return count;
}

}  // namespace memkit
