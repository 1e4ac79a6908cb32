// The encoder under the WebGPU rule: the seed's cases, by hand.
#include "memkit/arrays/encoder.hpp"

#include <gtest/gtest.h>

#include "memkit/arrays/context.hpp"
#include "memkit/arrays/usage_scope.hpp"
#include "memkit/memkit.hpp"

namespace memkit::arrays {
namespace {

struct fixture {
  sim_backend device{[] {
    sim_options o;
    o.capacity = std::size_t{1} << 30;
    return o;
  }()};
  allocator memory{device};
};

std::size_t count_violations(const batch& b) {
  return check_usage_scope(std::span<const dispatch_record>(b.dispatches)).size();
}

// a, b, c filled and submitted; they share one buffer.
std::vector<handle> make_inputs(context& arrays, encoder& work) {
  std::vector<handle> in;
  for (int i = 0; i < 3; ++i) {
    in.push_back(arrays.empty(4096));
    work.dispatch({"fill", {float(i + 1)}}, {{in.back(), access::write}});
  }
  work.submit();
  return in;
}

TEST(encoder, output_never_shares_a_buffer_with_read_only_inputs) {
  fixture f;
  context arrays(f.memory, {.rule = aliasing_rule::webgpu_usage_scope});
  encoder work(arrays);
  std::vector<handle> in = make_inputs(arrays, work);
  ASSERT_EQ(in[0].get_range()->buffer, in[1].get_range()->buffer);
  handle out = arrays.empty(4096);
  work.dispatch({"add", {}}, {{in[0], access::read}, {in[1], access::read}, {out, access::write}});
  const batch& b = work.submit();
  EXPECT_EQ(count_violations(b), 0u);
  EXPECT_NE(out.get_range()->buffer, in[0].get_range()->buffer);
}

TEST(encoder, without_a_rule_the_output_shares_the_buffer) {
  fixture f;
  context arrays(f.memory, {.rule = aliasing_rule::none});
  encoder work(arrays);
  std::vector<handle> in = make_inputs(arrays, work);
  handle out = arrays.empty(4096);
  work.dispatch({"add", {}}, {{in[0], access::read}, {in[1], access::read}, {out, access::write}});
  const batch& b = work.submit();
  EXPECT_EQ(out.get_range()->buffer, in[0].get_range()->buffer);
  EXPECT_EQ(count_violations(b), 1u) << "what WebGPU would reject";
}

TEST(encoder, zero_then_write_in_one_batch_places_the_output_away_from_its_inputs) {
  fixture f;
  context arrays(f.memory, {.rule = aliasing_rule::webgpu_usage_scope});
  encoder work(arrays);
  std::vector<handle> in = make_inputs(arrays, work);
  handle out = arrays.empty(4096);
  work.dispatch({"fill", {0}}, {{out, access::write}});  // alone: any buffer would do
  work.dispatch({"add", {}}, {{in[0], access::read},
                              {in[1], access::read},
                              {in[2], access::read},
                              {out, access::read_write}});
  const batch& b = work.submit();
  EXPECT_EQ(count_violations(b), 0u);
  EXPECT_EQ(b.dispatches.size(), 2u) << "placed right the first time: no copy";
  EXPECT_EQ(arrays.get_statistics().relocations, 0u);
}

TEST(encoder, zero_then_write_across_batches_moves_the_output_with_a_copy) {
  fixture f;
  context arrays(f.memory, {.rule = aliasing_rule::webgpu_usage_scope});
  encoder work(arrays);
  std::vector<handle> in = make_inputs(arrays, work);
  handle out = arrays.empty(4096);
  work.dispatch({"fill", {0}}, {{out, access::write}});
  work.submit();  // bound beside a, b, c: nothing else was known
  ASSERT_EQ(out.get_range()->buffer, in[0].get_range()->buffer);
  work.dispatch({"add", {}}, {{in[0], access::read},
                              {in[1], access::read},
                              {in[2], access::read},
                              {out, access::read_write}});
  const batch& b = work.submit();
  EXPECT_EQ(count_violations(b), 0u);
  ASSERT_EQ(b.dispatches.size(), 2u);
  EXPECT_TRUE(b.dispatches[0].relocation);
  EXPECT_EQ(b.dispatches[0].work.name, "copy");
  EXPECT_EQ(b.dispatches[0].bindings[0].buffer, in[0].get_range()->buffer);
  EXPECT_EQ(b.dispatches[0].bindings[1].buffer, out.get_range()->buffer);
  EXPECT_NE(out.get_range()->buffer, in[0].get_range()->buffer);
  EXPECT_EQ(arrays.get_statistics().relocation_copies, 1u);
}

TEST(encoder, a_full_overwrite_moves_without_a_copy) {
  fixture f;
  context arrays(f.memory, {.rule = aliasing_rule::webgpu_usage_scope});
  encoder work(arrays);
  std::vector<handle> in = make_inputs(arrays, work);
  handle x = in[2];
  in.pop_back();
  work.dispatch({"add", {}}, {{in[0], access::read}, {in[1], access::read}, {x, access::write}});
  const batch& b = work.submit();
  EXPECT_EQ(count_violations(b), 0u);
  EXPECT_EQ(b.dispatches.size(), 1u);
  EXPECT_EQ(arrays.get_statistics().relocations, 1u);
  EXPECT_EQ(arrays.get_statistics().relocation_copies, 0u);
}

TEST(encoder, writable_bindings_may_share_a_buffer) {
  fixture f;
  context arrays(f.memory, {.rule = aliasing_rule::webgpu_usage_scope});
  encoder work(arrays);
  handle a = arrays.empty(4096);
  handle b = arrays.empty(4096);
  work.dispatch({"fill2", {}}, {{a, access::write}, {b, access::write}});
  const batch& done = work.submit();
  EXPECT_EQ(count_violations(done), 0u);
  EXPECT_EQ(a.get_range()->buffer, b.get_range()->buffer);
}

TEST(encoder, handles_dropped_in_a_batch_lend_their_memory_to_later_dispatches) {
  fixture f;
  context arrays(f.memory, {.rule = aliasing_rule::webgpu_usage_scope});
  encoder work(arrays);
  handle x = arrays.empty(1 << 20);
  work.dispatch({"fill", {1}}, {{x, access::write}});
  handle y = arrays.empty(1 << 20);
  work.dispatch({"add", {}}, {{x, access::read}, {y, access::write}});
  x.reset();
  handle z = arrays.empty(1 << 20);
  work.dispatch({"add", {}}, {{y, access::read}, {z, access::write}});
  const batch& b = work.submit();
  EXPECT_EQ(count_violations(b), 0u);
  // z takes x's place: x's last use came before z's first.
  EXPECT_EQ(b.dispatches[2].bindings[1].buffer, b.dispatches[0].bindings[0].buffer);
  EXPECT_EQ(b.dispatches[2].bindings[1].offset, b.dispatches[0].bindings[0].offset);
}

}  // namespace
}  // namespace memkit::arrays
