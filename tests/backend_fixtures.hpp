// Backends every conformance test runs against. A backend that cannot run on this
// machine is skipped with a printed reason.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "memkit/memkit.hpp"
#if MEMKIT_HAVE_CUDA
#include "memkit/backends/cuda.hpp"
#endif

namespace memkit::testing {

// One fixture per backend and pool policy the conformance suite runs against.
// get_skip_reason() is empty where the backend can run on this machine.
struct cpu_fixture {
  static constexpr const char* name = "cpu";
  static constexpr pool_policy policy = pool_policy::segments;
  static constexpr bool small_segments_in_arena = false;  // allocator_options' own
  static std::unique_ptr<backend> make() { return std::make_unique<cpu_backend>(); }
  static std::string get_skip_reason() { return {}; }
};

struct sim_fixture {
  static constexpr const char* name = "sim_segments";
  static constexpr pool_policy policy = pool_policy::segments;
  static constexpr bool small_segments_in_arena = false;
  static std::unique_ptr<backend> make() {
    sim_options o;
    o.capacity = std::size_t{1} << 30;
    return std::make_unique<sim_backend>(o);
  }
  static std::string get_skip_reason() { return {}; }
};

struct sim_arena_fixture : sim_fixture {
  static constexpr const char* name = "sim_arena";
  static constexpr pool_policy policy = pool_policy::arena;
};

// The arena with the small pool's segments on its pages.
struct sim_arena_small_fixture : sim_arena_fixture {
  static constexpr const char* name = "sim_arena_small";
  static constexpr bool small_segments_in_arena = true;
};

#if MEMKIT_HAVE_CUDA
struct cuda_fixture {
  static constexpr const char* name = "cuda_segments";
  static constexpr pool_policy policy = pool_policy::segments;
  static constexpr bool small_segments_in_arena = false;
  static std::unique_ptr<backend> make() { return std::make_unique<cuda_backend>(); }
  static std::string get_skip_reason() {
    const cuda_availability cuda = check_cuda_device(0);
    return cuda.available ? std::string() : "no CUDA device: " + cuda.reason;
  }
};

struct cuda_arena_fixture : cuda_fixture {
  static constexpr const char* name = "cuda_arena";
  static constexpr pool_policy policy = pool_policy::arena;
};

struct cuda_arena_small_fixture : cuda_arena_fixture {
  static constexpr const char* name = "cuda_arena_small";
  static constexpr bool small_segments_in_arena = true;
};

using all_backends =
    ::testing::Types<cpu_fixture, sim_fixture, sim_arena_fixture, sim_arena_small_fixture,
                     cuda_fixture, cuda_arena_fixture, cuda_arena_small_fixture>;
#else
using all_backends =
    ::testing::Types<cpu_fixture, sim_fixture, sim_arena_fixture, sim_arena_small_fixture>;
#endif

struct backend_names {
  template <class T>
  static std::string GetName(int) {
    return T::name;
  }
};

}  // namespace memkit::testing
