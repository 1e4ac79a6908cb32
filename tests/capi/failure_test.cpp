// One error base under everything memkit throws, and its one mapping to C statuses.
#include <gtest/gtest.h>

#include <cerrno>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "memkit/adaptors/fault_injection.hpp"
#include "memkit/backends/vulkan.hpp"
#include "memkit/capi.hpp"
#include "memkit/planner.hpp"
#include "memkit/trace.hpp"
#if MEMKIT_HAVE_CUDA
#include "memkit/backends/cuda.hpp"
#endif

namespace memkit {
namespace {

static_assert(std::is_base_of_v<std::runtime_error, error>);
static_assert(std::is_base_of_v<error, invalid_argument>);
static_assert(std::is_base_of_v<error, out_of_memory>);
static_assert(std::is_base_of_v<error, invariant_violation>);
static_assert(std::is_base_of_v<error, unavailable>);
static_assert(std::is_base_of_v<error, os_error>);
static_assert(std::is_base_of_v<error, trace::trace_error>);
static_assert(std::is_base_of_v<error, planner::planner_error>);
static_assert(std::is_base_of_v<error, injected_fault>);
static_assert(std::is_base_of_v<error, vulkan_error>);
static_assert(std::is_base_of_v<unavailable, vulkan_unavailable>);
#if MEMKIT_HAVE_CUDA
static_assert(std::is_base_of_v<error, cuda_error>);
#endif

template <class Exception>
capi::failure fail_with(const Exception& thrown) {
  try {
    throw thrown;
  } catch (...) {
    return capi::get_current_failure();
  }
}

TEST(capi_failure, every_error_maps_to_its_status_with_its_message) {
  EXPECT_EQ(fail_with(invalid_argument("[a] bad")).status, MEMKIT_INVALID_ARGUMENT);
  EXPECT_EQ(fail_with(unavailable("[a] none")).status, MEMKIT_UNAVAILABLE);
  EXPECT_EQ(fail_with(vulkan_unavailable("[a] none")).status, MEMKIT_UNAVAILABLE);
  EXPECT_EQ(fail_with(invariant_violation("[a] bug")).status, MEMKIT_INTERNAL_ERROR);
  EXPECT_EQ(fail_with(trace::trace_error("[a] line")).status, MEMKIT_INTERNAL_ERROR);
  EXPECT_EQ(fail_with(std::bad_alloc()).status, MEMKIT_OUT_OF_MEMORY);
  EXPECT_STREQ(fail_with(std::bad_alloc()).message, "[memkit] the host ran out of memory");
  EXPECT_EQ(fail_with(42).status, MEMKIT_INTERNAL_ERROR);

  out_of_memory::details details;
  details.requested_bytes = 7;
  details.limit_bytes = 5;
  const capi::failure oom = fail_with(out_of_memory("[a] full", details));
  EXPECT_EQ(oom.status, MEMKIT_OUT_OF_MEMORY);
  EXPECT_EQ(oom.details.requested_bytes, 7u);
  EXPECT_EQ(oom.details.limit_bytes, 5u);
  EXPECT_EQ(fail_with(invalid_argument("[a] bad")).details.requested_bytes, 0u);
}

TEST(capi_failure, os_error_keeps_the_errno) {
  const os_error e("[memkit::f] connect", ENOENT);
  EXPECT_EQ(e.get_code(), std::errc::no_such_file_or_directory);
  EXPECT_EQ(std::string(e.what()).rfind("[memkit::f] connect: ", 0), 0u);
}

}  // namespace
}  // namespace memkit
