// Backends every conformance test runs against. A backend that cannot run on this
// machine is skipped with a printed reason.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "memkit/memkit.hpp"

namespace memkit::testing {

struct cpu_fixture {
  static constexpr const char* name = "cpu";
  static std::unique_ptr<backend> make() { return std::make_unique<cpu_backend>(); }
};

struct sim_fixture {
  static constexpr const char* name = "sim";
  static std::unique_ptr<backend> make() {
    sim_options o;
    o.capacity = std::size_t{1} << 30;
    return std::make_unique<sim_backend>(o);
  }
};

using all_backends = ::testing::Types<cpu_fixture, sim_fixture>;

struct backend_names {
  template <class T>
  static std::string GetName(int) {
    return T::name;
  }
};

}  // namespace memkit::testing
