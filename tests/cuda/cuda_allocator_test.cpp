// memkit::allocator over the cuda backend: usable memory, stream-ordered reuse,
// pooled pinned staging buffers.
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "cuda/cuda_test_support.hpp"
#include "memkit/allocator.hpp"

#if MEMKIT_HAVE_CUDA
namespace memkit {
namespace {

using testing::stream_gate;

class cuda_allocator_test : public ::testing::Test {
 protected:
  void SetUp() override {
    MEMKIT_SKIP_WITHOUT_CUDA();
    ASSERT_EQ(cudaStreamCreate(&first_), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&second_), cudaSuccess);
  }
  void TearDown() override {
    if (first_) cudaStreamDestroy(first_);
    if (second_) cudaStreamDestroy(second_);
  }
  cudaStream_t first_ = nullptr;
  cudaStream_t second_ = nullptr;
};

TEST_F(cuda_allocator_test, blocks_are_device_memory_that_holds_what_is_written) {
  cuda_backend device;
  allocator alloc(device, {.validate = true});
  std::vector<allocation> blocks;
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4096}, std::size_t{3} << 20}) {
    blocks.push_back(alloc.allocate(bytes));
    ASSERT_EQ(cudaMemset(reinterpret_cast<void*>(blocks.back().address), 0xab, bytes), cudaSuccess);
    unsigned char last = 0;
    ASSERT_EQ(cudaMemcpy(&last, reinterpret_cast<void*>(blocks.back().address + bytes - 1), 1,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(last, 0xab);
  }
  for (const allocation& a : blocks) alloc.free(a.address);
  EXPECT_EQ(alloc.get_statistics().active_bytes, 0u);
}

// After clear_cache the arena makes pages again in groups: one physical allocation
// of many pages, mapped and granted by one call each. They hold what is written, and
// go back whole.
TEST_F(cuda_allocator_test, pages_made_again_after_clear_cache_hold_what_is_written) {
  cuda_backend device;
  if (!device.get_facts().virtual_memory) GTEST_SKIP() << "the device has no virtual memory";
  allocator alloc(device, {.policy = pool_policy::arena, .validate = true});
  const std::size_t page = device.get_facts().granularity;
  const std::size_t bytes = 40 * page;
  alloc.free(alloc.allocate(bytes).address);
  alloc.clear_cache();
  const std::uint64_t created = device.get_counters().pages_created;
  const allocation a = alloc.allocate(bytes);
  EXPECT_LT(device.get_counters().pages_created - created, 40u) << "groups, not single pages";
  ASSERT_EQ(cudaMemset(reinterpret_cast<void*>(a.address), 0x5a, bytes), cudaSuccess);
  std::vector<unsigned char> host(bytes);
  ASSERT_EQ(
      cudaMemcpy(host.data(), reinterpret_cast<void*>(a.address), bytes, cudaMemcpyDeviceToHost),
      cudaSuccess);
  EXPECT_EQ(host.front(), 0x5a);
  EXPECT_EQ(host[bytes / 2], 0x5a);
  EXPECT_EQ(host.back(), 0x5a);
  alloc.free(a.address);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  alloc.clear_cache();
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, 0u);
  EXPECT_EQ(device.get_counters().pages_released, device.get_counters().pages_created);
}

TEST_F(cuda_allocator_test, a_block_is_reused_at_once_on_its_own_stream) {
  cuda_backend device;
  allocator alloc(device, {.validate = true});
  const queue_id q = device.get_queue(first_);
  stream_gate gate(first_);  // the stream has work queued that has not run
  const allocation a = alloc.allocate(1 << 20, q);
  alloc.free(a.address);
  EXPECT_EQ(alloc.allocate(1 << 20, q).address, a.address);
}

TEST_F(cuda_allocator_test, another_stream_gets_other_memory_while_the_first_has_not_run) {
  cuda_backend device;
  allocator alloc(device, {.validate = true, .order_queues = false});
  const queue_id q1 = device.get_queue(first_);
  const queue_id q2 = device.get_queue(second_);
  const allocation a = alloc.allocate(1 << 20, q1);
  {
    stream_gate gate(first_);
    alloc.free(a.address);  // work queued on first_ may still use the block
    const allocation b = alloc.allocate(1 << 20, q2);
    EXPECT_NE(b.address, a.address);
    alloc.free(b.address);
  }
  ASSERT_EQ(cudaStreamSynchronize(first_), cudaSuccess);
}

// With ordering (the default) the second stream reuses the block at once: its
// later work waits for the first stream's on the device, not the host.
TEST_F(cuda_allocator_test, another_stream_reuses_the_block_once_ordered_after_the_first) {
  cuda_backend device;
  allocator alloc(device, {.validate = true});
  const queue_id q1 = device.get_queue(first_);
  const queue_id q2 = device.get_queue(second_);
  const allocation a = alloc.allocate(2 << 20, q1);  // one whole page: no room beside it
  std::uint64_t after = 0;
  {
    stream_gate gate(first_);
    alloc.free(a.address);
    const allocation b = alloc.allocate(2 << 20, q2);
    EXPECT_EQ(b.address, a.address);
    EXPECT_EQ(alloc.get_statistics().queue_orders, 1u);
    EXPECT_EQ(device.get_counters().orders, 1u);
    after = device.get_submitted(q2);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_LT(device.get_completed(q2), after) << "second_ waits for first_, which is held";
    alloc.free(b.address);
  }
  device.wait({q2, after});
  EXPECT_GE(device.get_completed(q2), after);
}

TEST_F(cuda_allocator_test, a_block_recorded_on_another_stream_waits_for_it) {
  cuda_backend device;
  allocator alloc(device, {.validate = true});
  const queue_id q1 = device.get_queue(first_);
  const queue_id q2 = device.get_queue(second_);
  const allocation a = alloc.allocate(1 << 20, q1);
  alloc.record_use(a.address, q2);
  stream_gate gate(second_);
  alloc.free(a.address);
  // Even its own stream may not reuse it while second_ has not run.
  const allocation b = alloc.allocate(1 << 20, q1);
  EXPECT_NE(b.address, a.address);
}

TEST_F(cuda_allocator_test, pinned_staging_buffers_are_pooled) {
  cuda_backend host(cuda_options{.memory = cuda_memory::pinned_host});
  allocator staging(host, {.validate = true});
  cuda_backend device;
  allocator alloc(device);
  const allocation target = alloc.allocate(64 << 10);
  for (int i = 0; i < 10; ++i) {
    const allocation buffer = staging.allocate(64 << 10);
    auto* bytes = static_cast<unsigned char*>(host.get_host_pointer(buffer.address));
    ASSERT_NE(bytes, nullptr);
    std::memset(bytes, i, 64 << 10);
    ASSERT_EQ(cudaMemcpyAsync(reinterpret_cast<void*>(target.address), bytes, 64 << 10,
                              cudaMemcpyHostToDevice, first_),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(first_), cudaSuccess);
    staging.free(buffer.address);
  }
  unsigned char last = 0;
  ASSERT_EQ(cudaMemcpy(&last, reinterpret_cast<void*>(target.address), 1, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(last, 9);
  EXPECT_EQ(staging.get_statistics().backend_allocations, 1u);
  EXPECT_EQ(host.get_counters().segment_allocs, 1u);
  alloc.free(target.address);
}

TEST_F(cuda_allocator_test, out_of_memory_names_the_request_and_leaves_cuda_clean) {
  cuda_backend device;
  allocator alloc(device);
  const std::size_t too_much = device.get_facts().capacity - (std::size_t{1} << 20);
  EXPECT_THROW(alloc.allocate(too_much), out_of_memory);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(alloc.get_statistics().reserved_bytes, 0u);
}

}  // namespace
}  // namespace memkit
#endif
