// The data interface's defaults (include/memkit/device_data.hpp): transfers, fill and
// copy through the host pointer of a device whose memory the host can reach.
#include "memkit/device_data.hpp"

#include <cstring>
#include <string>

#include "memkit/errors.hpp"

namespace memkit {

void device_data::copy_to_device(address_t dst, const void* src, std::size_t host_bytes,
                                 queue_id /*queue*/, element_conversion conversion) {
  store_elements(require_host_pointer(dst, "copy_to_device"), src, host_bytes, conversion);
}

void device_data::copy_to_host(void* dst, address_t src, std::size_t host_bytes, queue_id /*queue*/,
                               element_conversion conversion) {
  load_elements(dst, require_host_pointer(src, "copy_to_host"), host_bytes, conversion);
}

void device_data::fill(address_t dst, std::size_t bytes, std::uint32_t pattern,
                       queue_id /*queue*/) {
  auto* device = static_cast<unsigned char*>(require_host_pointer(dst, "fill"));
  for (std::size_t i = 0; i + 4 <= bytes; i += 4) std::memcpy(device + i, &pattern, 4);
}

void device_data::copy(address_t dst, address_t src, std::size_t bytes, queue_id /*queue*/) {
  if (bytes)
    std::memmove(require_host_pointer(dst, "copy"), require_host_pointer(src, "copy"), bytes);
}

void device_data::store_elements(void* device, const void* host, std::size_t host_bytes,
                                 element_conversion conversion) {
  if (conversion == element_conversion::none) {
    if (host_bytes) std::memcpy(device, host, host_bytes);
    return;
  }
  for (std::size_t i = 0; i < host_bytes; ++i) {
    const std::uint32_t word = static_cast<const unsigned char*>(host)[i] != 0;
    std::memcpy(static_cast<unsigned char*>(device) + 4 * i, &word, 4);
  }
}

void device_data::load_elements(void* host, const void* device, std::size_t host_bytes,
                                element_conversion conversion) {
  if (conversion == element_conversion::none) {
    if (host_bytes) std::memcpy(host, device, host_bytes);
    return;
  }
  for (std::size_t i = 0; i < host_bytes; ++i) {
    std::uint32_t word;
    std::memcpy(&word, static_cast<const unsigned char*>(device) + 4 * i, 4);
    static_cast<unsigned char*>(host)[i] = word != 0;
  }
}

void* device_data::require_host_pointer(address_t address, const char* function) const {
  void* host = get_host_pointer(address);
  if (!host) {
    throw invalid_argument(std::string("[memkit::device_data::") + function +
                           "] the device has no host pointer and no transfers of its own");
  }
  return host;
}

device_data& forwarded_data::require(const char* function) const {
  if (!wrapped_) {
    throw invalid_argument(std::string("[memkit::forwarded_data::") + function +
                           "] the wrapped backend has no data interface");
  }
  return *wrapped_;
}

}  // namespace memkit
