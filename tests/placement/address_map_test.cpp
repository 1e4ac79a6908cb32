#include "pools/address_map.hpp"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace memkit::pools {
namespace {

TEST(address_map, agrees_with_a_reference_map_under_random_operations) {
  std::mt19937_64 rng(11);
  address_map<int> map;
  std::unordered_map<std::uintptr_t, int*> reference;
  std::vector<int> values(64);
  for (int i = 0; i < 200000; ++i) {
    const std::uintptr_t key = (1 + rng() % 5000) * 512;
    if (reference.count(key)) {
      ASSERT_EQ(map.find(key), reference[key]);
      if (rng() % 2) {
        map.erase(key);
        reference.erase(key);
      }
    } else {
      ASSERT_EQ(map.find(key), nullptr);
      int* v = &values[rng() % values.size()];
      map.insert(key, v);
      reference[key] = v;
    }
    ASSERT_EQ(map.size(), reference.size());
  }
}

}  // namespace
}  // namespace memkit::pools
