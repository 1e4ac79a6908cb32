// Handles: ids without memory, ownership, can_mut, and when memory is released.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "memkit/arrays/context.hpp"
#include "memkit/arrays/encoder.hpp"
#include "memkit/memkit.hpp"

namespace memkit::arrays {
namespace {

sim_options device_options() {
  sim_options o;
  o.capacity = std::size_t{1} << 30;
  o.queue_count = 2;
  return o;
}

TEST(handle, empty_has_an_id_and_no_memory) {
  sim_backend device(device_options());
  allocator memory(device, {.validate = true});
  context arrays(memory);
  handle a = arrays.empty(4096);
  handle b = arrays.empty(4096);
  EXPECT_NE(a.get_id(), b.get_id());
  EXPECT_EQ(a.get_size(), 4096u);
  EXPECT_FALSE(a.is_bound());
  EXPECT_FALSE(a.get_range().has_value());
  EXPECT_EQ(memory.get_statistics().allocations, 0u) << "no memory asked for before a kernel";
  EXPECT_EQ(device.get_counters().segment_allocs, 0u);
}

TEST(handle, ids_are_unique_across_threads) {
  sim_backend device(device_options());
  allocator memory(device);
  context arrays(memory);
  std::vector<std::vector<handle_id>> ids(8);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) ids[t].push_back(arrays.empty(64).get_id());
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<handle_id> all;
  for (auto& v : ids) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), 8u * 2000u);
}

TEST(handle, can_mut_only_for_the_only_owner) {
  sim_backend device(device_options());
  allocator memory(device);
  context arrays(memory);
  handle a = arrays.empty(256);
  EXPECT_TRUE(a.can_mut());
  {
    handle b = a;
    EXPECT_FALSE(a.can_mut());
    EXPECT_FALSE(b.can_mut());
  }
  EXPECT_TRUE(a.can_mut());
  handle c = std::move(a);
  EXPECT_TRUE(c.can_mut());
  EXPECT_FALSE(a);
}

TEST(handle, queued_bindings_do_not_count_as_owners) {
  sim_backend device(device_options());
  allocator memory(device);
  context arrays(memory);
  encoder work(arrays);
  handle a = arrays.empty(256);
  work.dispatch({"fill", {1}}, {{a, access::write}});
  EXPECT_TRUE(a.can_mut()) << "a binding is not an owner";
  work.submit();
  EXPECT_TRUE(a.is_bound());
}

TEST(handle, memory_is_bound_at_submit) {
  sim_backend device(device_options());
  allocator memory(device);
  context arrays(memory);
  encoder work(arrays);
  handle a = arrays.empty(1000);
  work.dispatch({"fill", {1}}, {{a, access::write}});
  EXPECT_FALSE(a.is_bound()) << "recorded, not yet submitted";
  work.submit();
  ASSERT_TRUE(a.get_range().has_value());
  EXPECT_EQ(a.get_range()->size, 1000u);
  EXPECT_EQ(a.get_range()->offset % 256, 0u);
}

TEST(handle, dropping_the_last_handle_while_queued_frees_after_submit) {
  sim_backend device(device_options());
  allocator memory(device);
  context arrays(memory, {.empty_buffers_kept = 0});
  std::uint64_t submitted_with_live = 0;
  encoder work(arrays, [&](const batch&) {
    submitted_with_live = arrays.get_statistics().live_bytes;
    return device.submit(0);
  });
  handle a = arrays.empty(4096);
  handle out = arrays.empty(4096);
  work.dispatch({"fill", {1}}, {{a, access::write}});
  work.dispatch({"add", {}}, {{a, access::read}, {out, access::write}});
  a.reset();  // the framework drops it while both kernels are still queued
  work.submit();
  // The batch was placed with a's memory and submitted; a's block went back
  // only after its last use in the batch, and out's is still live.
  EXPECT_GE(submitted_with_live, 4096u);
  EXPECT_EQ(arrays.get_statistics().live_bytes, 4096u);
  EXPECT_EQ(arrays.get_statistics().requested_bytes, 4096u);
}

TEST(handle, dropped_memory_is_reused_at_once_on_the_same_queue) {
  sim_backend device(device_options());
  allocator memory(device);
  context arrays(memory);
  encoder work(arrays, [&](const batch&) { return device.submit(0); });
  handle a = arrays.empty(4096);
  work.dispatch({"fill", {1}}, {{a, access::write}});
  work.submit();  // queued, not complete
  const buffer_range first = *a.get_range();
  a.reset();
  handle b = arrays.empty(4096);
  work.dispatch({"fill", {2}}, {{b, access::write}});
  work.submit();
  EXPECT_EQ(b.get_range()->buffer, first.buffer);
  EXPECT_EQ(b.get_range()->offset, first.offset) << "queue order makes reuse safe";
}

TEST(handle, record_use_holds_memory_until_the_other_queue_passes) {
  sim_backend device(device_options());
  allocator memory(device);
  context arrays(memory);
  encoder work(arrays, [&](const batch&) { return device.submit(0); });
  handle a = arrays.empty(4096);
  work.dispatch({"fill", {1}}, {{a, access::write}});
  work.submit();
  const buffer_range first = *a.get_range();
  arrays.record_use(a, 1);
  const std::uint64_t other = device.submit(1);  // queue 1 reads a
  a.reset();
  handle b = arrays.empty(4096);
  work.dispatch({"fill", {2}}, {{b, access::write}});
  work.submit();
  EXPECT_FALSE(b.get_range()->buffer == first.buffer && b.get_range()->offset == first.offset)
      << "queue 1 may still read a";
  device.complete(1, other);
  handle c = arrays.empty(4096);
  work.dispatch({"fill", {3}}, {{c, access::write}});
  work.submit();
  EXPECT_EQ(c.get_range()->buffer, first.buffer);
  EXPECT_EQ(c.get_range()->offset, first.offset);
}

TEST(handle, buffers_go_back_through_the_allocators_queue_ordered_free) {
  sim_backend device(device_options());
  // Without ordering between queues: another queue waits for the free's fence.
  allocator memory(device, {.validate = true, .order_queues = false});
  context arrays(memory, {.buffer_bytes = std::size_t{4} << 20, .empty_buffers_kept = 0});
  encoder work(arrays, [&](const batch&) { return device.submit(0); });
  handle a = arrays.empty(std::size_t{3} << 20);  // a dedicated buffer
  work.dispatch({"fill", {1}}, {{a, access::write}});
  const std::uint64_t fence = work.submit().fence;
  const std::size_t reserved = memory.get_statistics().active_bytes;
  EXPECT_GT(reserved, 0u);
  a.reset();
  work.dispatch({"fill", {1}}, {{arrays.empty(256), access::write}});
  work.submit();  // after this submit the empty dedicated buffer is freed
  // The allocator must not hand those bytes to queue 1 before queue 0 passes.
  const allocation other = memory.allocate(std::size_t{3} << 20, 1);
  EXPECT_EQ(memory.get_statistics().backend_allocations, 3u) << "a fresh segment for queue 1";
  device.complete(0, fence + 1);
  const allocation later = memory.allocate(std::size_t{3} << 20, 1);
  EXPECT_EQ(memory.get_statistics().backend_allocations, 3u) << "the freed buffer once complete";
  memory.free(other.address);
  memory.free(later.address);
}

TEST(handle, encoder_rejects_bad_bindings) {
  sim_backend device(device_options());
  allocator memory(device);
  context arrays(memory, {.rule = aliasing_rule::webgpu_usage_scope});
  encoder work(arrays);
  handle a = arrays.empty(256);
  EXPECT_THROW(work.dispatch({"add", {}}, {{a, access::read}, {a, access::write}}),
               invalid_argument);
  EXPECT_THROW(work.dispatch({"fill", {}}, {{handle(), access::write}}), invalid_argument);
  EXPECT_NO_THROW(work.dispatch({"add", {}}, {{a, access::read}, {a, access::read}}));
}

}  // namespace
}  // namespace memkit::arrays
