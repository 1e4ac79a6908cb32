// Where the context puts handles: shared buffers that grow with the pool, a
// buffer of the request's size when only the rule kept it from room elsewhere,
// and, for a conflict with memory bound earlier, moving the side with fewer bytes.
#include <gtest/gtest.h>

#include "memkit/arrays/context.hpp"
#include "memkit/arrays/encoder.hpp"
#include "memkit/arrays/usage_scope.hpp"
#include "memkit/memkit.hpp"

namespace memkit::arrays {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

struct fixture {
  sim_backend device{[] {
    sim_options o;
    o.capacity = std::size_t{4} << 30;
    return o;
  }()};
  allocator memory{device};
};

// Binds a handle of `bytes` with a fill kernel, submitted at once.
handle filled(context& arrays, encoder& work, std::size_t bytes) {
  handle h = arrays.empty(bytes);
  work.dispatch({"fill", {1}}, {{h, access::write}});
  work.submit();
  return h;
}

TEST(placement, shared_buffers_grow_with_the_bytes_held) {
  fixture f;
  context arrays(f.memory, {.buffer_bytes = 8 * MiB,
                            .min_buffer_bytes = MiB,
                            .growth_divisor = 4,
                            .dedicated_above = 8 * MiB});
  encoder work(arrays);
  std::vector<handle> live;
  std::vector<std::size_t> sizes;  // of each new buffer, in order
  for (int i = 0; i < 64; ++i) {
    const std::size_t before = arrays.get_statistics().buffers_created;
    live.push_back(filled(arrays, work, MiB - 4096));
    if (arrays.get_statistics().buffers_created > before) {
      sizes.push_back(arrays.get_buffer_size(live.back().get_range()->buffer));
    }
  }
  ASSERT_GE(sizes.size(), 4u);
  EXPECT_EQ(sizes.front(), MiB) << "a small pool starts with a small buffer";
  for (std::size_t k = 1; k < sizes.size(); ++k) {
    EXPECT_GE(sizes[k], sizes[k - 1]) << "buffer " << k;
    EXPECT_LE(sizes[k], 8 * MiB) << "never above buffer_bytes";
    EXPECT_EQ(sizes[k] % MiB, 0u);
  }
  EXPECT_EQ(sizes.back(), 8 * MiB) << "a large pool reaches buffer_bytes";
  // Held bytes stay within one buffer of what the handles need.
  const context_statistics s = arrays.get_statistics();
  EXPECT_LE(s.buffer_bytes, s.live_bytes + 8 * MiB);
}

TEST(placement, fixed_buffers_when_min_buffer_bytes_is_zero) {
  fixture f;
  context arrays(f.memory, {.buffer_bytes = 4 * MiB, .min_buffer_bytes = 0});
  encoder work(arrays);
  handle a = filled(arrays, work, 4096);
  EXPECT_EQ(arrays.get_buffer_size(a.get_range()->buffer), 4 * MiB);
}

TEST(placement, a_buffer_opened_for_the_rule_alone_has_the_requests_size) {
  fixture f;
  context arrays(f.memory, {.rule = aliasing_rule::webgpu_usage_scope,
                            .buffer_bytes = 64 * MiB,
                            .min_buffer_bytes = MiB,
                            .growth_divisor = 1});
  encoder work(arrays);
  handle full = filled(arrays, work, 20 * MiB);  // a first buffer with no room left
  handle a = filled(arrays, work, 4096);         // a second one, of the pool's size
  const std::uint32_t second = a.get_range()->buffer;
  ASSERT_NE(second, full.get_range()->buffer);
  ASSERT_EQ(arrays.get_buffer_size(second), 20 * MiB);
  handle out = arrays.empty(4096);
  work.dispatch({"add", {}}, {{a, access::read}, {out, access::write}});
  const batch& b = work.submit();
  EXPECT_TRUE(check_usage_scope(std::span<const dispatch_record>(b.dispatches)).empty());
  EXPECT_NE(out.get_range()->buffer, second);
  EXPECT_EQ(arrays.get_buffer_size(out.get_range()->buffer), MiB)
      << "not a share of the pool: the second buffer had room";
  EXPECT_EQ(arrays.get_statistics().rule_buffers, 1u);
}

TEST(placement, an_output_finds_room_in_a_buffer_its_inputs_do_not_use) {
  fixture f;
  context arrays(
      f.memory,
      {.rule = aliasing_rule::webgpu_usage_scope, .buffer_bytes = MiB, .min_buffer_bytes = MiB});
  encoder work(arrays);
  // Two buffers with room: a in the first, b in the second.
  handle a = filled(arrays, work, 4096);
  handle rest_of_first = filled(arrays, work, MiB - 4096);
  handle b = filled(arrays, work, 4096);
  ASSERT_NE(a.get_range()->buffer, b.get_range()->buffer);
  rest_of_first.reset();
  const std::uint64_t created = arrays.get_statistics().buffers_created;
  handle out = arrays.empty(4096);
  work.dispatch({"add", {}}, {{b, access::read}, {out, access::write}});
  work.submit();
  EXPECT_EQ(out.get_range()->buffer, a.get_range()->buffer);
  EXPECT_EQ(arrays.get_statistics().buffers_created, created) << "no new buffer";
}

TEST(placement, a_large_in_place_output_stays_and_its_small_input_moves) {
  fixture f;
  context arrays(f.memory, {.rule = aliasing_rule::webgpu_usage_scope});
  encoder work(arrays);
  handle x = arrays.empty(MiB / 2);
  handle small = arrays.empty(4096);
  work.dispatch({"fill", {1}}, {{x, access::write}});
  work.dispatch({"fill", {2}}, {{small, access::write}});
  work.submit();
  ASSERT_EQ(x.get_range()->buffer, small.get_range()->buffer);
  const buffer_range x_before = *x.get_range();
  work.dispatch({"add", {}}, {{small, access::read}, {x, access::read_write}});
  const batch& b = work.submit();
  EXPECT_TRUE(check_usage_scope(std::span<const dispatch_record>(b.dispatches)).empty());
  ASSERT_EQ(b.dispatches.size(), 2u);
  EXPECT_TRUE(b.dispatches[0].relocation);
  EXPECT_EQ(b.dispatches[0].bindings[0].handle, small.get_id()) << "the copy moves the input";
  EXPECT_EQ(x.get_range()->buffer, x_before.buffer);
  EXPECT_EQ(x.get_range()->offset, x_before.offset);
  EXPECT_NE(small.get_range()->buffer, x_before.buffer);
  EXPECT_EQ(arrays.get_statistics().relocated_bytes, 4096u);
}

TEST(placement, a_moved_input_used_on_another_queue_keeps_its_old_bytes_until_that_queue_passes) {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  o.queue_count = 2;
  sim_backend device(o);
  allocator memory(device);
  context arrays(memory, {.rule = aliasing_rule::webgpu_usage_scope});
  encoder work(arrays, [&](const batch&) { return device.submit(0); });
  handle x = arrays.empty(MiB / 2);
  handle small = arrays.empty(4096);
  work.dispatch({"fill", {1}}, {{x, access::write}});
  work.dispatch({"fill", {2}}, {{small, access::write}});
  work.submit();
  const buffer_range old = *small.get_range();
  arrays.record_use(small, 1);
  const std::uint64_t other = device.submit(1);  // queue 1 reads small
  work.dispatch({"add", {}}, {{small, access::read}, {x, access::read_write}});
  work.submit();
  ASSERT_NE(small.get_range()->buffer, old.buffer) << "small moved";
  handle reuse = arrays.empty(4096);
  work.dispatch({"fill", {3}}, {{reuse, access::write}});
  work.submit();
  EXPECT_FALSE(reuse.get_range()->buffer == old.buffer && reuse.get_range()->offset == old.offset)
      << "queue 1 may still read the old bytes";
  device.complete(1, other);
  handle later = arrays.empty(4096);
  work.dispatch({"fill", {4}}, {{later, access::write}});
  work.submit();
  EXPECT_EQ(later.get_range()->buffer, old.buffer);
  EXPECT_EQ(later.get_range()->offset, old.offset);
}

}  // namespace
}  // namespace memkit::arrays
