// device_set on simulated devices: one allocator per device, limits and statistics
// per device and in total, peer access.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "memkit/devices.hpp"
#include "memkit/memkit.hpp"

namespace memkit {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// N simulated devices, each `capacity` bytes.
struct sim_devices {
  explicit sim_devices(std::uint32_t count, std::size_t capacity = std::size_t{1} << 30,
                       bool peer_access = true) {
    for (std::uint32_t d = 0; d < count; ++d) {
      sim_options o;
      o.capacity = capacity;
      o.device = d;
      o.peer_access = peer_access;
      sims.push_back(std::make_unique<sim_backend>(o));
      pointers.push_back(sims.back().get());
    }
  }
  std::vector<std::unique_ptr<sim_backend>> sims;
  std::vector<backend*> pointers;
};

class DeviceSetTest : public ::testing::TestWithParam<pool_policy> {
 protected:
  device_set_options make_options() const {
    device_set_options o;
    o.allocator.policy = GetParam();
    o.allocator.validate = true;
    return o;
  }
};

TEST_P(DeviceSetTest, EachDeviceHasItsOwnAllocatorAndAddresses) {
  sim_devices sims(3);
  device_set set(sims.pointers, make_options());
  ASSERT_EQ(set.get_device_count(), 3u);
  std::vector<device_allocation> blocks;
  for (std::uint32_t d = 0; d < 3; ++d) blocks.push_back(set.allocate(d, (d + 1) * 4 * kMiB));
  for (std::uint32_t d = 0; d < 3; ++d) {
    EXPECT_EQ(blocks[d].device, d);
    EXPECT_GE(blocks[d].size, (d + 1) * 4 * kMiB);
    EXPECT_EQ(set.get_statistics(d).active_bytes, blocks[d].size);
    EXPECT_EQ(set.get_statistics(d).live_blocks, 1u);
    EXPECT_GT(sims.sims[d]->get_counters().segment_allocs + sims.sims[d]->get_counters().maps, 0u);
    for (std::uint32_t e = 0; e < d; ++e) EXPECT_NE(blocks[d].address, blocks[e].address);
  }
  const statistics total = set.get_total_statistics();
  EXPECT_EQ(total.active_bytes, blocks[0].size + blocks[1].size + blocks[2].size);
  EXPECT_EQ(total.live_blocks, 3u);
  EXPECT_EQ(total.allocations, 3u);
  // A block freed on the wrong device is an unknown address there.
  EXPECT_THROW(set.free(1, blocks[0].address), invalid_argument);
  for (const device_allocation& b : blocks) set.free(b);
  EXPECT_EQ(set.get_total_statistics().active_bytes, 0u);
  EXPECT_EQ(set.get_total_statistics().frees, 3u);
}

TEST_P(DeviceSetTest, UnknownDevicesAreRefusedByName) {
  sim_devices sims(2);
  device_set set(sims.pointers, make_options());
  try {
    set.allocate(2, kMiB);
    FAIL() << "allocated on a device that does not exist";
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[memkit::device_set::allocate] device 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(set.get_statistics(7), invalid_argument);
  std::vector<backend*> none;
  EXPECT_THROW(device_set(none, make_options()), invalid_argument);
  std::vector<backend*> null_device{sims.pointers[0], nullptr};
  EXPECT_THROW(device_set(null_device, make_options()), invalid_argument);
}

TEST_P(DeviceSetTest, LimitsPerDevice) {
  sim_devices sims(2);
  device_set set(sims.pointers, make_options());
  EXPECT_EQ(set.set_memory_limit(1, 8 * kMiB), std::size_t{1} << 30);
  EXPECT_EQ(set.get_memory_limit(1), 8 * kMiB);
  EXPECT_THROW(set.allocate(1, 16 * kMiB), out_of_memory);
  const device_allocation on_zero = set.allocate(0, 16 * kMiB);
  EXPECT_EQ(set.get_statistics(1).out_of_memory, 1u);
  EXPECT_EQ(set.get_statistics(0).out_of_memory, 0u);
  set.free(on_zero);
}

TEST_P(DeviceSetTest, TotalLimitTakesTheOtherDevicesCache) {
  sim_devices sims(2);
  device_set_options o = make_options();
  o.total_memory_limit = 64 * kMiB;
  device_set set(sims.pointers, o);
  const device_allocation first = set.allocate(0, 48 * kMiB);
  EXPECT_LE(set.get_total_held_bytes(), 64 * kMiB);
  // Device 1 has room of its own, but not within the total.
  try {
    set.allocate(1, 32 * kMiB);
    FAIL() << "the total limit was not enforced";
  } catch (const out_of_memory& e) {
    EXPECT_NE(std::string(e.what()).find("total memory limit of 67108864"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(set.get_statistics(1).active_bytes, 0u);
  // Freed, the first block stays cached on device 0; device 1's request takes it.
  set.free(first);
  EXPECT_GT(set.get_statistics(0).reserved_bytes, 0u);
  const device_allocation second = set.allocate(1, 32 * kMiB);
  EXPECT_LE(set.get_total_held_bytes(), 64 * kMiB);
  EXPECT_EQ(set.get_statistics(0).reserved_bytes, 0u);
  EXPECT_EQ(set.set_total_memory_limit(0), 64 * kMiB);
  const device_allocation third = set.allocate(0, 48 * kMiB);  // no total any more
  set.free(second);
  set.free(third);
  set.clear_cache();
  EXPECT_EQ(set.get_total_held_bytes(), 0u);
}

TEST_P(DeviceSetTest, TotalLimitHoldsUnderConcurrency) {
  sim_devices sims(3);
  device_set_options o = make_options();
  o.allocator.validate = false;  // several threads: validation would serialize them anyway
  o.total_memory_limit = 96 * kMiB;
  device_set set(sims.pointers, o);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&set, t] {
      std::mt19937 random(t + 1);
      std::vector<device_allocation> held;
      for (int i = 0; i < 400; ++i) {
        if (!held.empty() && (random() % 2 || held.size() > 6)) {
          set.free(held.back());
          held.pop_back();
          continue;
        }
        const auto device = static_cast<std::uint32_t>(random() % 3);
        try {
          held.push_back(set.allocate(device, (1 + random() % 12) * kMiB + random() % 4096));
        } catch (const out_of_memory&) {
        }
      }
      for (const device_allocation& b : held) set.free(b);
    });
  }
  for (std::thread& t : threads) t.join();
  const statistics total = set.get_total_statistics();
  EXPECT_LE(total.peak_reserved_bytes, 96 * kMiB);
  EXPECT_EQ(total.active_bytes, 0u);
  EXPECT_EQ(total.live_blocks, 0u);
  for (std::uint32_t d = 0; d < 3; ++d) set.get_allocator(d).validate();
}

TEST_P(DeviceSetTest, TotalPeaksArePeaksOfTheSum) {
  sim_devices sims(2);
  device_set set(sims.pointers, make_options());
  const device_allocation a = set.allocate(0, 32 * kMiB);
  set.free(a);
  set.clear_cache();
  const device_allocation b = set.allocate(1, 16 * kMiB);
  const statistics total = set.get_total_statistics();
  EXPECT_EQ(total.peak_active_bytes, a.size);  // never both at once
  EXPECT_EQ(total.peak_requested_bytes, set.get_statistics(0).peak_requested_bytes +
                                            set.get_statistics(1).peak_requested_bytes);
  EXPECT_GE(total.peak_reserved_bytes, a.size);
  set.reset_peak();
  EXPECT_EQ(set.get_total_statistics().peak_active_bytes, b.size);
  set.free(b);
}

TEST_P(DeviceSetTest, PeerAccessIsGrantedWhenAsked) {
  sim_devices sims(2);
  device_set set(sims.pointers, make_options());
  const device_allocation before = set.allocate(0, 8 * kMiB);
  EXPECT_TRUE(set.can_access_peer(1, 0));
  EXPECT_FALSE(set.is_peer_access_enabled(1, 0));
  EXPECT_TRUE(set.is_peer_access_enabled(0, 0));
  EXPECT_TRUE(sims.sims[0]->is_accessible_from(before.address, 0));
  EXPECT_FALSE(sims.sims[0]->is_accessible_from(before.address, 1));
  const std::uint64_t access_sets = sims.sims[0]->get_counters().set_accesses;
  set.enable_peer_access(1, 0);
  EXPECT_TRUE(set.is_peer_access_enabled(1, 0));
  EXPECT_FALSE(set.is_peer_access_enabled(0, 1));
  // Memory mapped before the grant is reachable, and so is memory mapped after.
  EXPECT_TRUE(sims.sims[0]->is_accessible_from(before.address, 1));
  if (GetParam() == pool_policy::arena) {
    EXPECT_GT(sims.sims[0]->get_counters().set_accesses, access_sets);  // set again for the peer
  }
  const device_allocation after = set.allocate(0, 8 * kMiB);
  EXPECT_TRUE(sims.sims[0]->is_accessible_from(after.address, 1));
  EXPECT_FALSE(sims.sims[1]->is_accessible_from(set.allocate(1, kMiB).address, 0));
  EXPECT_EQ(sims.sims[0]->get_counters().peers_granted, 1u);
  set.enable_peer_access(1, 0);  // twice is harmless
  EXPECT_EQ(sims.sims[0]->get_counters().peers_granted, 1u);
  EXPECT_EQ(set.enable_all_peer_access(), 2u);
  EXPECT_TRUE(set.is_peer_access_enabled(0, 1));
  set.free(before);
  set.free(after);
}

TEST_P(DeviceSetTest, PeerAccessAtConstruction) {
  sim_devices sims(3);
  device_set_options o = make_options();
  o.peer_access = true;
  device_set set(sims.pointers, o);
  for (std::uint32_t a = 0; a < 3; ++a) {
    for (std::uint32_t b = 0; b < 3; ++b) EXPECT_TRUE(set.is_peer_access_enabled(a, b));
  }
}

TEST_P(DeviceSetTest, PeerAccessRefusedWhereTheBackendCannot) {
  sim_devices sims(2, std::size_t{1} << 30, /*peer_access=*/false);
  device_set set(sims.pointers, make_options());
  EXPECT_FALSE(set.can_access_peer(1, 0));
  EXPECT_THROW(set.enable_peer_access(1, 0), invalid_argument);
  EXPECT_EQ(set.enable_all_peer_access(), 0u);

  if (GetParam() != pool_policy::segments) return;  // the cpu backend has no virtual memory
  cpu_backend cpu;
  std::vector<backend*> mixed{sims.pointers[0], &cpu};
  device_set mixed_set(mixed, make_options());
  EXPECT_FALSE(mixed_set.can_access_peer(0, 1));
  try {
    mixed_set.enable_peer_access(0, 1);
    FAIL() << "the cpu backend granted peer access";
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("memkit::peer_access"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, DeviceSetTest,
                         ::testing::Values(pool_policy::segments, pool_policy::arena),
                         [](const auto& param_info) {
                           return param_info.param == pool_policy::arena ? "arena" : "segments";
                         });

}  // namespace
}  // namespace memkit
