// The sim device's optional contents store: transfers and kernels on segment bytes
// kept in host memory, so round trips through a discrete device are real in tests.
#include <cstring>
#include <string>

#include "memkit/backends/sim.hpp"
#include "memkit/errors.hpp"

namespace memkit {

namespace {
// Never-written device bytes read as this, so a missed upload shows in tests.
constexpr unsigned char kUnwritten = 0xA5;
}  // namespace

unsigned char* sim_backend::find_contents(address_t address, std::size_t bytes,
                                          const char* function) {
  if (!options_.store_contents) {
    throw invalid_argument(std::string("[memkit::sim_backend::") + function +
                           "] the contents store is off (sim_options::store_contents)");
  }
  auto segment = segments_.upper_bound(address);
  if (segment == segments_.begin() ||
      address + bytes > std::prev(segment)->first + std::prev(segment)->second) {
    throw invalid_argument(std::string("[memkit::sim_backend::") + function + "] " +
                           std::to_string(bytes) + " bytes at " + std::to_string(address) +
                           " are not inside one live segment");
  }
  --segment;
  auto stored = contents_.find(segment->first);
  if (stored == contents_.end()) {
    // Segments are made and freed in sim_backend.cpp; drop the contents of freed ones
    // here, when a new segment is first touched (addresses are never reused).
    std::erase_if(contents_, [&](const auto& entry) { return !segments_.contains(entry.first); });
    stored =
        contents_.emplace(segment->first, std::vector<unsigned char>(segment->second, kUnwritten))
            .first;
  }
  return stored->second.data() + (address - segment->first);
}

void sim_backend::copy_to_device(address_t dst, const void* src, std::size_t host_bytes,
                                 queue_id queue, element_conversion conversion) {
  check_queue(queue, "copy_to_device");
  const std::size_t device_bytes =
      conversion == element_conversion::bool32 ? host_bytes * 4 : host_bytes;
  std::lock_guard lock(mutex_);
  unsigned char* device = find_contents(dst, device_bytes, "copy_to_device");
  store_elements(device, src, host_bytes, conversion);
  counters_.copies_to_device++;
  counters_.bytes_to_device += device_bytes;
}

void sim_backend::copy_to_host(void* dst, address_t src, std::size_t host_bytes, queue_id queue,
                               element_conversion conversion) {
  check_queue(queue, "copy_to_host");
  const std::size_t device_bytes =
      conversion == element_conversion::bool32 ? host_bytes * 4 : host_bytes;
  std::lock_guard lock(mutex_);
  const unsigned char* device = find_contents(src, device_bytes, "copy_to_host");
  load_elements(dst, device, host_bytes, conversion);
  counters_.copies_to_host++;
  counters_.bytes_to_host += device_bytes;
}

void sim_backend::fill(address_t dst, std::size_t bytes, std::uint32_t pattern, queue_id queue) {
  check_queue(queue, "fill");
  std::lock_guard lock(mutex_);
  unsigned char* device = find_contents(dst, bytes, "fill");
  for (std::size_t i = 0; i + 4 <= bytes; i += 4) std::memcpy(device + i, &pattern, 4);
  counters_.kernels++;
}

void sim_backend::copy(address_t dst, address_t src, std::size_t bytes, queue_id queue) {
  check_queue(queue, "copy");
  std::lock_guard lock(mutex_);
  const unsigned char* from = find_contents(src, bytes, "copy");
  unsigned char* to = find_contents(dst, bytes, "copy");
  if (bytes) std::memmove(to, from, bytes);
  counters_.kernels++;
}

}  // namespace memkit
