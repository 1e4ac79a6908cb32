// Backends every conformance test runs against. A backend that cannot run on this
// machine is skipped with a printed reason.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "memkit/memkit.hpp"

namespace memkit::testing {

// One fixture per backend and pool policy the conformance suite runs against.
struct cpu_fixture {
  static constexpr const char* name = "cpu";
  static constexpr pool_policy policy = pool_policy::segments;
  static std::unique_ptr<backend> make() { return std::make_unique<cpu_backend>(); }
};

struct sim_fixture {
  static constexpr const char* name = "sim_segments";
  static constexpr pool_policy policy = pool_policy::segments;
  static std::unique_ptr<backend> make() {
    sim_options o;
    o.capacity = std::size_t{1} << 30;
    return std::make_unique<sim_backend>(o);
  }
};

struct sim_arena_fixture : sim_fixture {
  static constexpr const char* name = "sim_arena";
  static constexpr pool_policy policy = pool_policy::arena;
};

using all_backends = ::testing::Types<cpu_fixture, sim_fixture, sim_arena_fixture>;

struct backend_names {
  template <class T>
  static std::string GetName(int) {
    return T::name;
  }
};

}  // namespace memkit::testing
