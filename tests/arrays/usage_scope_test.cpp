// The WebGPU usage-scope checker against the cases the specification names.
#include "memkit/arrays/usage_scope.hpp"

#include <gtest/gtest.h>

namespace memkit::arrays {
namespace {

bound_range at(std::uint32_t buffer, std::uint64_t offset, std::uint64_t size, access use) {
  return {0, buffer, offset, size, use};
}

TEST(usage_scope, read_and_write_of_one_buffer_at_disjoint_offsets_is_a_violation) {
  const std::vector<bound_range> b = {at(0, 0, 256, access::read), at(0, 1024, 256, access::write)};
  const auto found = check_usage_scope(b);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].buffer, 0u);
  EXPECT_NE(found[0].message.find("writable usage and another usage"), std::string::npos);
}

TEST(usage_scope, read_write_counts_as_writable) {
  const std::vector<bound_range> b = {at(3, 0, 256, access::read),
                                      at(3, 512, 256, access::read_write)};
  EXPECT_EQ(check_usage_scope(b).size(), 1u);
}

TEST(usage_scope, read_only_uses_combine) {
  const std::vector<bound_range> b = {at(0, 0, 256, access::read), at(0, 0, 256, access::read),
                                      at(0, 256, 256, access::read), at(1, 0, 64, access::write)};
  EXPECT_TRUE(check_usage_scope(b).empty());
}

TEST(usage_scope, disjoint_writable_bindings_of_one_buffer_combine) {
  const std::vector<bound_range> b = {at(0, 0, 256, access::write),
                                      at(0, 256, 256, access::read_write)};
  EXPECT_TRUE(check_usage_scope(b).empty());
}

TEST(usage_scope, overlapping_writable_bindings_are_a_violation) {
  const std::vector<bound_range> b = {at(0, 0, 512, access::write), at(0, 256, 256, access::write)};
  const auto found = check_usage_scope(b);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("overlap"), std::string::npos);
}

TEST(usage_scope, dispatches_are_separate_scopes) {
  std::vector<dispatch_record> d(2);
  d[0].bindings = {at(0, 0, 256, access::write)};
  d[1].bindings = {at(0, 0, 256, access::read), at(0, 256, 256, access::write)};
  const auto found = check_usage_scope(std::span<const dispatch_record>(d));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].dispatch, 1u);
}

}  // namespace
}  // namespace memkit::arrays
