#include "memkit/arrays/layout.hpp"

#include <algorithm>

namespace memkit::arrays {

std::size_t get_element_bytes(dtype type) noexcept {
  switch (type) {
    case dtype::boolean:
    case dtype::int8:
    case dtype::uint8:
      return 1;
    case dtype::int16:
    case dtype::uint16:
    case dtype::float16:
    case dtype::bfloat16:
      return 2;
    case dtype::int32:
    case dtype::uint32:
    case dtype::float32:
      return 4;
    case dtype::int64:
    case dtype::uint64:
    case dtype::float64:
      return 8;
  }
  return 1;
}

const char* get_name(dtype type) noexcept {
  switch (type) {
    case dtype::boolean:
      return "bool";
    case dtype::int8:
      return "int8";
    case dtype::uint8:
      return "uint8";
    case dtype::int16:
      return "int16";
    case dtype::uint16:
      return "uint16";
    case dtype::float16:
      return "float16";
    case dtype::bfloat16:
      return "bfloat16";
    case dtype::int32:
      return "int32";
    case dtype::uint32:
      return "uint32";
    case dtype::float32:
      return "float32";
    case dtype::int64:
      return "int64";
    case dtype::uint64:
      return "uint64";
    case dtype::float64:
      return "float64";
  }
  return "unknown";
}

storage_rules get_native_rules(const device_facts& facts) noexcept {
  return {"native", 1, std::max<std::size_t>(facts.alignment, 4), 4};
}

storage_rules get_webgpu_rules(const device_facts& facts) noexcept {
  return {"webgpu", 4, std::max(facts.alignment, kWebgpuOffsetAlignment), 4};
}

storage_rules get_storage_rules(const device_facts& facts, const device_data& data) noexcept {
  return data.follows_webgpu_rules() ? get_webgpu_rules(facts) : get_native_rules(facts);
}

storage_layout get_storage_layout(dtype type, const storage_rules& rules) noexcept {
  storage_layout layout;
  layout.type = type;
  layout.host_element_bytes = get_element_bytes(type);
  layout.device_element_bytes = layout.host_element_bytes;
  layout.offset_alignment = rules.offset_alignment;
  layout.size_multiple = rules.size_multiple;
  if (type == dtype::boolean && rules.bool_bytes == 4) {
    layout.device_element_bytes = 4;
    layout.conversion = element_conversion::bool32;
  }
  return layout;
}

}  // namespace memkit::arrays
