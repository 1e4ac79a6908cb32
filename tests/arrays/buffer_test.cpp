// Device-aware buffers over every backend present: data written on either side
// reads back exactly on the other after random access sequences; unified backends
// copy nothing; discrete ones make exactly the transfers the sequence needs.
#include "memkit/arrays/buffer.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "memkit/memkit.hpp"
#if MEMKIT_HAVE_VULKAN
#include "memkit/backends/vulkan.hpp"
#endif

namespace memkit::arrays {
namespace {

// A backend (nullptr with `why` set when it cannot run here) and the rules its
// buffers follow (none: the device's own).
struct cpu_device {
  static constexpr const char* name = "cpu";
  static std::unique_ptr<backend> make(std::string&) { return std::make_unique<cpu_backend>(); }
  static buffer_allocator_options options(const backend&) { return {}; }
};
// A unified device whose layout differs (WebGPU's rules on shared memory): host
// copies and conversions, through the backend's default transfers.
struct cpu_webgpu_device : cpu_device {
  static constexpr const char* name = "cpu_webgpu";
  static buffer_allocator_options options(const backend& b) {
    return {get_webgpu_rules(b.get_facts())};
  }
};
struct sim_device {
  static constexpr const char* name = "sim";
  static std::unique_ptr<backend> make(std::string&) {
    sim_options o;
    o.capacity = std::size_t{1} << 30;
    o.store_contents = true;
    return std::make_unique<sim_backend>(o);
  }
  static buffer_allocator_options options(const backend&) { return {}; }
};
struct sim_webgpu_device : sim_device {
  static constexpr const char* name = "sim_webgpu";
  static buffer_allocator_options options(const backend& b) {
    return {get_webgpu_rules(b.get_facts())};
  }
};
#if MEMKIT_HAVE_VULKAN
struct vulkan_device {
  static constexpr const char* name = "vulkan";
  static constexpr bool webgpu = false;
  static std::unique_ptr<backend> make(std::string& why) {
    try {
      return std::make_unique<vulkan_backend>(
          vulkan_options{.validation = true, .webgpu_compatible = webgpu});
    } catch (const vulkan_unavailable& e) {
      why = e.what();
      return nullptr;
    }
  }
  static buffer_allocator_options options(const backend&) { return {}; }
};
struct vulkan_webgpu_device : vulkan_device {
  static constexpr const char* name = "vulkan_webgpu";
  static std::unique_ptr<backend> make(std::string& why) {
    try {
      return std::make_unique<vulkan_backend>(
          vulkan_options{.validation = true, .webgpu_compatible = true});
    } catch (const vulkan_unavailable& e) {
      why = e.what();
      return nullptr;
    }
  }
};
using buffer_devices = ::testing::Types<cpu_device, cpu_webgpu_device, sim_device,
                                        sim_webgpu_device, vulkan_device, vulkan_webgpu_device>;
#else
using buffer_devices =
    ::testing::Types<cpu_device, cpu_webgpu_device, sim_device, sim_webgpu_device>;
#endif

struct device_names {
  template <class T>
  static std::string GetName(int) {
    return T::name;
  }
};

template <class Device>
class buffers : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    device_ = Device::make(why);
    if (!device_) GTEST_SKIP() << "no " << Device::name << " device: " << why;
    memory_ = std::make_unique<allocator>(*device_, allocator_options{.validate = true});
    buffers_ = std::make_unique<buffer_allocator>(*memory_, Device::options(*device_));
  }
  void TearDown() override {
#if MEMKIT_HAVE_VULKAN
    if (auto* vk = dynamic_cast<vulkan_backend*>(device_.get())) {
      if (!vk->is_validation_on()) std::printf("note: %s\n", vk->get_validation_note().c_str());
      std::string log;
      for (const std::string& m : vk->get_validation_log()) log += m + "\n";
      EXPECT_EQ(vk->get_validation_messages(), 0u) << log;
    }
#endif
  }
  bool is_unified() const { return device_->get_facts().unified; }
  // The data interface, to read and write device bytes behind the buffers' back.
  device_data& data() const { return *find_capability<device_data>(*device_); }

  std::unique_ptr<backend> device_;
  std::unique_ptr<allocator> memory_;
  std::unique_ptr<buffer_allocator> buffers_;
};

TYPED_TEST_SUITE(buffers, buffer_devices, device_names);

// What the host view should hold once a device fill of `words` words with
// `pattern` has run over a buffer of this layout.
void apply_fill(std::vector<unsigned char>& expected, const storage_layout& layout,
                std::size_t words, std::uint32_t pattern) {
  if (layout.conversion == element_conversion::bool32) {
    for (std::size_t i = 0; i < words && i < expected.size(); ++i) expected[i] = pattern != 0;
    return;
  }
  unsigned char bytes[4];
  std::memcpy(bytes, &pattern, 4);
  for (std::size_t j = 0; j < 4 * words && j < expected.size(); ++j) expected[j] = bytes[j % 4];
}

// A pattern whose bytes are valid values of the dtype (bools are 0 or 1).
std::uint32_t make_pattern(const storage_layout& layout, std::mt19937& rng) {
  if (layout.type != dtype::boolean) return static_cast<std::uint32_t>(rng());
  if (layout.conversion == element_conversion::bool32) return rng() & 1;
  return static_cast<std::uint32_t>(rng()) & 0x01010101u;
}

unsigned char make_value(dtype type, std::mt19937& rng) {
  return static_cast<unsigned char>(type == dtype::boolean ? rng() & 1 : rng());
}

TYPED_TEST(buffers, random_access_sequences_round_trip_with_exactly_the_transfers_needed) {
  const std::uint32_t queues = this->device_->get_facts().queue_count;
  for (dtype type : {dtype::uint32, dtype::uint8, dtype::boolean, dtype::float64}) {
    for (std::uint32_t seed = 0; seed < 12; ++seed) {
      std::mt19937 rng(seed * 7919 + static_cast<std::uint32_t>(type));
      const std::size_t count = 1 + rng() % 300;
      buffer b = this->buffers_->allocate(type, count);
      const storage_layout& layout = b.get_layout();
      const bool zero_copy = b.is_zero_copy();
      EXPECT_EQ(zero_copy, this->is_unified() && layout.is_identity());
      const std::size_t words = b.get_stored_bytes() / 4;
      const std::size_t moved = count * layout.device_element_bytes;
      std::vector<unsigned char> expected(b.get_host_bytes());
      const buffer_statistics start = this->buffers_->get_statistics();
      std::uint64_t uploads = 0, downloads = 0;
      bool host_current = false, device_current = false;
      std::string trail;

      for (int step = 0; step < 30; ++step) {
        // The first access writes, so the contents are defined from then on.
        const unsigned op = step == 0 ? (rng() & 1 ? 1u : 4u) : static_cast<unsigned>(rng() % 6);
        const auto mode = static_cast<access>(op % 3);
        const bool host_side = op < 3;
        trail += std::string(host_side ? " host_" : " device_") + (mode == access::read ? "read"
                                                                   : mode == access::write
                                                                       ? "write"
                                                                       : "read_write");
        SCOPED_TRACE(std::string(get_name(type)) + " x" + std::to_string(count) + " seed " +
                     std::to_string(seed) + ":" + trail);
        if (host_side) {
          if (!host_current && device_current && mode != access::write) downloads++;
          host_current = true;
          if (mode != access::read) device_current = false;
          auto* host = static_cast<unsigned char*>(b.get_host(mode));
          ASSERT_NE(host, nullptr);
          if (mode != access::write) {
            ASSERT_EQ(std::memcmp(host, expected.data(), expected.size()), 0);
          }
          if (mode == access::write) {
            for (unsigned char& v : expected) v = make_value(type, rng);
          } else if (mode == access::read_write) {
            for (int k = 0; k < 5; ++k) expected[rng() % expected.size()] = make_value(type, rng);
          }
          std::memcpy(host, expected.data(), expected.size());
        } else {
          if (!device_current && host_current && mode != access::write) uploads++;
          device_current = true;
          if (mode != access::read) host_current = false;
          const auto queue = static_cast<queue_id>(rng() % queues);
          const address_t address = b.get_device(mode, queue);
          ASSERT_NE(address, 0u);
          if (mode == access::read) {
            // Read the device copy behind the buffer's back: not counted by it.
            std::vector<unsigned char> seen(expected.size());
            this->data().copy_to_host(seen.data(), address, seen.size(), queue, layout.conversion);
            ASSERT_EQ(seen, expected);
          } else {
            const std::size_t filled = mode == access::write ? words : words / 2;
            const std::uint32_t pattern = make_pattern(layout, rng);
            this->data().fill(address, filled * 4, pattern, queue);
            apply_fill(expected, layout, filled, pattern);
          }
        }
        const buffer_statistics s = this->buffers_->get_statistics();
        const std::uint64_t want_up = zero_copy ? 0 : uploads;
        const std::uint64_t want_down = zero_copy ? 0 : downloads;
        ASSERT_EQ(s.copies_to_device - start.copies_to_device, want_up);
        ASSERT_EQ(s.copies_to_host - start.copies_to_host, want_down);
        ASSERT_EQ(s.bytes_to_device - start.bytes_to_device, want_up * moved);
        ASSERT_EQ(s.bytes_to_host - start.bytes_to_host, want_down * moved);
      }
      // Whatever side wrote last, the host reads it back exactly.
      ASSERT_EQ(std::memcmp(b.get_host(access::read), expected.data(), expected.size()), 0);
    }
  }
  const buffer_statistics end = this->buffers_->get_statistics();
  EXPECT_EQ(end.buffers, 0u);
  EXPECT_EQ(end.device_bytes, 0u);
  EXPECT_EQ(end.host_bytes, 0u);
}

TYPED_TEST(buffers, unified_devices_share_one_allocation) {
  buffer b = this->buffers_->allocate(dtype::float32, 1000);
  if (!b.is_zero_copy()) {
    // Discrete, or a layout that differs on the device: two copies, by design.
    EXPECT_TRUE(!this->is_unified() || !b.get_layout().is_identity());
    return;
  }
  void* host = b.get_host(access::write);
  const address_t device = b.get_device(access::read_write);
  EXPECT_EQ(host, this->data().get_host_pointer(device));
  EXPECT_FALSE(b.has_host_copy());
  const buffer_statistics s = this->buffers_->get_statistics();
  EXPECT_EQ(s.copies_to_device + s.copies_to_host, 0u);
  EXPECT_EQ(s.host_allocations, 0u);
  EXPECT_EQ(s.device_allocations, 1u);
}

TYPED_TEST(buffers, each_side_is_allocated_at_its_first_use) {
  buffer b = this->buffers_->allocate(dtype::int16, 513);
  EXPECT_FALSE(b.has_device_block());
  EXPECT_FALSE(b.has_host_copy());
  EXPECT_EQ(this->memory_->get_statistics().allocations, 0u);
  if (b.is_zero_copy()) return;
  b.get_device(access::write);
  EXPECT_TRUE(b.has_device_block());
  EXPECT_FALSE(b.has_host_copy());
  b.get_host(access::read);
  EXPECT_TRUE(b.has_host_copy());
  const buffer_statistics s = this->buffers_->get_statistics();
  EXPECT_EQ(s.device_bytes, b.get_stored_bytes());
  EXPECT_EQ(s.host_bytes, b.get_host_bytes());
  EXPECT_EQ(s.copies_to_host, 1u);
}

TYPED_TEST(buffers, bools_round_trip_through_the_stored_layout) {
  const std::size_t count = 1001;
  buffer b = this->buffers_->allocate(dtype::boolean, count);
  const bool wide = this->buffers_->get_rules().bool_bytes == 4;
  EXPECT_EQ(b.get_host_bytes(), count);
  EXPECT_EQ(b.get_stored_bytes(), wide ? 4 * count : 1004u);
  std::span<bool> host = b.get_host_span<bool>(access::write);
  ASSERT_EQ(host.size(), count);
  for (std::size_t i = 0; i < count; ++i) host[i] = (i * 7) % 3 == 0;
  const address_t device = b.get_device(access::read_write);
  // The device holds the stored layout: 4-byte words of 0 or 1 under WebGPU's rules.
  std::vector<unsigned char> raw(count * (wide ? 4 : 1));
  this->data().copy_to_host(raw.data(), device, raw.size(), 0);
  for (std::size_t i = 0; i < count; ++i) {
    if (wide) {
      std::uint32_t word;
      std::memcpy(&word, raw.data() + 4 * i, 4);
      ASSERT_EQ(word, (i * 7) % 3 == 0 ? 1u : 0u) << i;
    } else {
      ASSERT_EQ(raw[i], (i * 7) % 3 == 0 ? 1 : 0) << i;
    }
  }
  // The device turns the first 100 elements' words to true; the host sees bools.
  if (wide)
    this->data().fill(device, 400, 1, 0);
  else
    this->data().fill(device, 100, 0x01010101u, 0);
  std::span<const bool> back = b.get_host_span<const bool>(access::read);
  for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(back[i], i < 100 || (i * 7) % 3 == 0) << i;
  const buffer_statistics s = this->buffers_->get_statistics();
  EXPECT_EQ(s.device_bytes, b.get_stored_bytes());
  if (!b.is_zero_copy()) {
    EXPECT_EQ(s.bytes_to_device, count * (wide ? 4 : 1));
  }
}

TYPED_TEST(buffers, a_request_over_the_largest_binding_is_a_clear_error) {
  const device_facts& facts = this->device_->get_facts();
  const std::size_t element = this->buffers_->get_layout(dtype::boolean).device_element_bytes;
  const std::size_t count = facts.max_buffer / element + 1;
  try {
    buffer b = this->buffers_->allocate(dtype::boolean, count);
    FAIL() << "expected invalid_argument";
  } catch (const invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[memkit::buffer_allocator::allocate]"), std::string::npos) << what;
    EXPECT_NE(what.find("largest binding"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(facts.max_buffer)), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(count)), std::string::npos) << what;
  }
  EXPECT_EQ(this->buffers_->get_statistics().buffers, 0u);
  EXPECT_NO_THROW(this->buffers_->allocate(dtype::boolean, 16));
}

TEST(buffer_sim, transfers_are_real_and_counted_by_the_device_too) {
  sim_options o;
  o.store_contents = true;
  sim_backend device(o);
  allocator memory(device);
  buffer_allocator buffers(memory, {get_webgpu_rules(device.get_facts())});
  buffer b = buffers.allocate(dtype::boolean, 10);
  auto* host = static_cast<unsigned char*>(b.get_host(access::write));
  for (int i = 0; i < 10; ++i) host[i] = static_cast<unsigned char>(i & 1);
  b.get_device(access::read);
  b.get_host(access::read);  // both sides current: no download
  const sim_counters c = device.get_counters();
  EXPECT_EQ(c.copies_to_device, 1u);
  EXPECT_EQ(c.bytes_to_device, 40u);
  EXPECT_EQ(c.copies_to_host, 0u);
}

TEST(buffer_sim, transfers_without_the_contents_store_are_a_clear_error) {
  sim_backend device;
  allocator memory(device);
  buffer_allocator buffers(memory);
  buffer b = buffers.allocate(dtype::float32, 4);
  b.get_host(access::write);
  try {
    b.get_device(access::read);
    FAIL() << "expected invalid_argument";
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("store_contents"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memkit::arrays
