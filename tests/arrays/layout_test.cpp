// Storage layouts: element sizes per dtype and rules, stored sizes, offsets.
#include "memkit/arrays/layout.hpp"

#include <gtest/gtest.h>

namespace memkit::arrays {
namespace {

TEST(layout, framework_element_sizes) {
  EXPECT_EQ(get_element_bytes(dtype::boolean), 1u);
  EXPECT_EQ(get_element_bytes(dtype::uint8), 1u);
  EXPECT_EQ(get_element_bytes(dtype::bfloat16), 2u);
  EXPECT_EQ(get_element_bytes(dtype::float32), 4u);
  EXPECT_EQ(get_element_bytes(dtype::int64), 8u);
  EXPECT_STREQ(get_name(dtype::boolean), "bool");
}

// A device's data interface that says which storage rules apply.
struct rules_data : device_data {
  explicit rules_data(bool webgpu_rules) : webgpu(webgpu_rules) {}
  bool follows_webgpu_rules() const noexcept override { return webgpu; }
  bool webgpu;
};

TEST(layout, native_rules_store_every_dtype_as_the_framework_does) {
  device_facts facts;
  facts.alignment = 512;
  const storage_rules rules = get_storage_rules(facts, rules_data(false));
  EXPECT_STREQ(rules.name, "native");
  for (dtype t : {dtype::boolean, dtype::int8, dtype::float16, dtype::float32, dtype::float64}) {
    const storage_layout l = get_storage_layout(t, rules);
    EXPECT_EQ(l.device_element_bytes, l.host_element_bytes) << get_name(t);
    EXPECT_TRUE(l.is_identity()) << get_name(t);
    EXPECT_EQ(l.offset_alignment, 512u);
  }
}

TEST(layout, webgpu_rules_store_bool_in_four_bytes_at_256_byte_offsets) {
  device_facts facts;
  facts.alignment = 64;
  const storage_rules rules = get_storage_rules(facts, rules_data(true));
  EXPECT_STREQ(rules.name, "webgpu");
  const storage_layout b = get_storage_layout(dtype::boolean, rules);
  EXPECT_EQ(b.host_element_bytes, 1u);
  EXPECT_EQ(b.device_element_bytes, 4u);
  EXPECT_EQ(b.conversion, element_conversion::bool32);
  EXPECT_EQ(b.offset_alignment, 256u);
  EXPECT_EQ(b.get_host_bytes(3), 3u);
  EXPECT_EQ(b.get_stored_bytes(3), 12u);
  const storage_layout f = get_storage_layout(dtype::float32, rules);
  EXPECT_TRUE(f.is_identity());
  facts.alignment = 1024;  // a device stricter than WebGPU keeps its own alignment
  EXPECT_EQ(get_webgpu_rules(facts).offset_alignment, 1024u);
}

TEST(layout, stored_sizes_are_multiples_of_four_bytes) {
  const storage_rules rules = get_native_rules(device_facts{});
  for (dtype t : {dtype::boolean, dtype::uint8, dtype::int16, dtype::float32, dtype::uint64}) {
    const storage_layout l = get_storage_layout(t, rules);
    for (std::size_t count : {0u, 1u, 2u, 3u, 5u, 7u, 1000u, 1001u}) {
      const std::size_t stored = l.get_stored_bytes(count);
      EXPECT_EQ(stored % 4, 0u) << get_name(t) << " x" << count;
      EXPECT_GE(stored, l.get_host_bytes(count));
      EXPECT_LT(stored, l.get_host_bytes(count) + 4);
    }
  }
}

}  // namespace
}  // namespace memkit::arrays
