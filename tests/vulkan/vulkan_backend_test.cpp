// The Vulkan backend on whatever device is here (lavapipe in CI, NVIDIA on the GPU
// machine), with the validation layer on where installed: facts, limits, memory
// report, timeline fences, the fill / copy / bool shaders, and zero messages.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "memkit/arrays/buffer.hpp"
#include "memkit/memkit.hpp"
#if MEMKIT_HAVE_VULKAN
#include "memkit/backends/vulkan.hpp"
#endif

namespace memkit {
namespace {

#if MEMKIT_HAVE_VULKAN

class vulkan : public ::testing::TestWithParam<bool> {  // the parameter: WebGPU-compatible
 protected:
  void SetUp() override {
    try {
      device_ = std::make_unique<vulkan_backend>(
          vulkan_options{.validation = true, .webgpu_compatible = GetParam()});
    } catch (const vulkan_unavailable& e) {
      GTEST_SKIP() << "no Vulkan device: " << e.what();
    }
    if (!device_->is_validation_on()) {
      std::printf("note: validation off: %s\n", device_->get_validation_note().c_str());
    }
    memory_ = std::make_unique<allocator>(*device_, allocator_options{.validate = true});
  }
  void TearDown() override {
    if (!device_) return;
    memory_.reset();
    std::string log;
    for (const std::string& m : device_->get_validation_log()) log += m + "\n";
    EXPECT_EQ(device_->get_validation_messages(), 0u) << log;
  }
  std::vector<std::uint32_t> read_words(address_t address, std::size_t words) {
    std::vector<std::uint32_t> out(words);
    device_->copy_to_host(out.data(), address, 4 * words, 0);
    return out;
  }

  std::unique_ptr<vulkan_backend> device_;
  std::unique_ptr<allocator> memory_;
};

TEST_P(vulkan, facts_follow_the_device_limits_and_heaps) {
  const device_facts& f = device_->get_facts();
  const vulkan_limits& l = device_->get_limits();
  const vulkan_memory_report report = device_->calculate_memory_report();
  std::printf(
      "device %s (%s), Vulkan %u.%u; largest storage binding %zu, offset alignment %zu, "
      "largest allocation %zu; memory budget %s\n",
      l.device_name.c_str(), l.device_type.c_str(), l.api_version >> 22,
      (l.api_version >> 12) & 0x3ff, l.max_storage_buffer_range,
      l.min_storage_buffer_offset_alignment, l.max_memory_allocation_size,
      report.has_budget ? "on" : "absent");
  EXPECT_EQ(f.name, "vulkan:" + l.device_name);
  EXPECT_FALSE(f.unified);
  EXPECT_EQ(device_->follows_webgpu_rules(), GetParam());
  EXPECT_GT(f.max_buffer, 0u);
  EXPECT_LE(f.max_buffer, l.max_storage_buffer_range);
  EXPECT_EQ(f.max_buffer % f.granularity, 0u);
  EXPECT_EQ(f.alignment % l.min_storage_buffer_offset_alignment, 0u);
  EXPECT_EQ(f.alignment % 256, 0u);
  ASSERT_LT(report.segment_type, report.types.size());
  ASSERT_LT(report.staging_type, report.types.size());
  EXPECT_TRUE(report.types[report.segment_type].device_local);
  EXPECT_TRUE(report.types[report.staging_type].host_visible);
  EXPECT_TRUE(report.types[report.staging_type].host_coherent);
  EXPECT_EQ(f.capacity, report.heaps[report.types[report.segment_type].heap].size);
  for (const vulkan_heap& h : report.heaps) {
    std::printf("heap %zu bytes%s, budget %zu, usage %zu\n", h.size,
                h.device_local ? " device-local" : "", h.budget, h.usage);
    if (report.has_budget) {
      EXPECT_LE(h.budget, h.size);
    }
  }
}

TEST_P(vulkan, fill_and_copy_shaders_round_trip_and_fences_advance) {
  const std::size_t words = 100'003;
  const allocation a = memory_->allocate(4 * words);
  const allocation b = memory_->allocate(4 * words);
  const std::uint64_t before = device_->get_submitted(0);
  device_->fill(a.address, 4 * words, 0xDEADBEEFu, 0);
  std::vector<std::uint32_t> host(words);
  std::iota(host.begin(), host.end(), 7u);
  device_->copy_to_device(b.address, host.data(), 4 * 1000, 0);  // only the first 1000
  device_->copy(a.address, b.address, 4 * 1000, 0);
  EXPECT_EQ(device_->get_submitted(0), before + 3);
  const std::vector<std::uint32_t> seen = read_words(a.address, words);
  for (std::size_t i = 0; i < words; ++i) {
    ASSERT_EQ(seen[i], i < 1000 ? host[i] : 0xDEADBEEFu) << i;
  }
  device_->wait({0, device_->get_submitted(0)});
  EXPECT_GE(device_->get_completed(0), device_->get_submitted(0));
  const vulkan_counters c = device_->get_counters();
  EXPECT_EQ(c.copies_to_device, 1u);
  EXPECT_EQ(c.copies_to_host, 1u);
  EXPECT_EQ(c.bytes_to_device, 4000u);
  EXPECT_EQ(c.bytes_to_host, 4 * words);
  EXPECT_EQ(c.dispatches, 2u);
  memory_->free(a.address);
  memory_->free(b.address);
}

TEST_P(vulkan, bool_shaders_widen_to_words_and_narrow_back) {
  const std::size_t count = 4099;  // not a multiple of 4
  const allocation a = memory_->allocate(4 * count);
  std::vector<unsigned char> bools(count);
  for (std::size_t i = 0; i < count; ++i) bools[i] = static_cast<unsigned char>(i % 5 == 0 ? 0 : i);
  device_->copy_to_device(a.address, bools.data(), count, 0, element_conversion::bool32);
  const std::vector<std::uint32_t> words = read_words(a.address, count);
  for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(words[i], bools[i] != 0 ? 1u : 0u) << i;
  device_->fill(a.address, 4 * 8, 0x100u, 0);  // any nonzero word is true
  std::vector<unsigned char> back(count, 0xEE);
  device_->copy_to_host(back.data(), a.address, count, 0, element_conversion::bool32);
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_EQ(back[i], i < 8 || bools[i] != 0 ? 1 : 0) << i;
  }
  EXPECT_EQ(device_->get_counters().bytes_to_host, 2 * 4 * count);
  memory_->free(a.address);
}

TEST_P(vulkan, a_request_over_the_largest_binding_is_a_clear_error) {
  const std::size_t max = device_->get_facts().max_buffer;
  EXPECT_THROW(memory_->allocate(max + 1), invalid_argument);
  arrays::buffer_allocator buffers(*memory_);
  try {
    buffers.allocate(arrays::dtype::float32, max / 4 + 1);
    FAIL() << "expected invalid_argument";
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("largest binding of " + std::to_string(max)),
              std::string::npos)
        << e.what();
  }
  // Kernels take whole words: a clear error, not a truncated fill.
  const allocation a = memory_->allocate(64);
  EXPECT_THROW(device_->fill(a.address, 6, 0, 0), invalid_argument);
  EXPECT_THROW(device_->fill(a.address + (std::size_t{1} << 30), 4, 0, 0), invalid_argument);
  memory_->free(a.address);
}

TEST_P(vulkan, buffers_follow_the_mode_layout) {
  arrays::buffer_allocator buffers(*memory_);
  arrays::buffer b = buffers.allocate(arrays::dtype::boolean, 300);
  EXPECT_EQ(b.get_stored_bytes(), GetParam() ? 1200u : 300u);
  EXPECT_EQ(b.get_layout().offset_alignment % 256, 0u);
  auto host = b.get_host_span<bool>(arrays::access::write);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = i % 2 == 1;
  b.get_device(arrays::access::read_write);
  auto back = b.get_host_span<const bool>(arrays::access::read);
  for (std::size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], i % 2 == 1) << i;
  const arrays::buffer_statistics s = buffers.get_statistics();
  EXPECT_EQ(s.copies_to_device, 1u);
  EXPECT_EQ(s.copies_to_host, 1u);
  EXPECT_EQ(s.bytes_to_host, b.get_stored_bytes());
}

INSTANTIATE_TEST_SUITE_P(modes, vulkan, ::testing::Values(false, true),
                         [](const auto& mode) { return mode.param ? "webgpu" : "native"; });

TEST(vulkan_validation, layer_is_on_where_installed) {
  try {
    vulkan_backend device(vulkan_options{.validation = true});
    if (!device.is_validation_on()) {
      GTEST_SKIP() << "validation layer absent: " << device.get_validation_note();
    }
    EXPECT_EQ(device.get_validation_messages(), 0u);
  } catch (const vulkan_unavailable& e) {
    GTEST_SKIP() << "no Vulkan device: " << e.what();
  }
}

#else

TEST(vulkan, backend_built) {
  GTEST_SKIP() << "memkit was built without the Vulkan backend (cmake/vulkan.cmake said why)";
}

#endif

}  // namespace
}  // namespace memkit
