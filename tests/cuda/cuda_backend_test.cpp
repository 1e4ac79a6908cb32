// The cuda backend on its own: facts, segments of each memory kind, streams as
// queues, pooled events as fences, virtual memory.
#if MEMKIT_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <thread>
#include <vector>

#include "cuda/cuda_test_support.hpp"
#include "memkit/errors.hpp"

namespace memkit {
namespace {

using testing::stream_gate;

std::vector<unsigned char> read_back(address_t address, std::size_t bytes) {
  std::vector<unsigned char> host(bytes);
  EXPECT_EQ(cudaMemcpy(host.data(), reinterpret_cast<void*>(address), bytes, cudaMemcpyDefault),
            cudaSuccess);
  return host;
}

class cuda_backend_test : public ::testing::Test {
 protected:
  void SetUp() override { MEMKIT_SKIP_WITHOUT_CUDA(); }
};

TEST_F(cuda_backend_test, facts_describe_the_device) {
  cuda_backend device;
  const device_facts& f = device.get_facts();
  EXPECT_EQ(f.name, "cuda:0");
  EXPECT_GT(f.capacity, std::size_t{1} << 30);
  EXPECT_EQ(f.granularity % (std::size_t{2} << 20), 0u);
  EXPECT_EQ(f.max_buffer, f.capacity);
  EXPECT_EQ(f.queue_count, 32u);
  EXPECT_FALSE(f.unified);
  EXPECT_EQ(device.get_memory(), cuda_memory::device);
}

TEST_F(cuda_backend_test, device_segments_hold_what_is_written) {
  cuda_backend device;
  const std::size_t bytes = device.get_facts().granularity;
  const address_t a = device.allocate_segment(bytes);
  ASSERT_NE(a, 0u);
  EXPECT_EQ(a % device.get_facts().alignment, 0u);
  EXPECT_EQ(device.get_host_pointer(a), nullptr);
  ASSERT_EQ(cudaMemset(reinterpret_cast<void*>(a), 0x5a, bytes), cudaSuccess);
  const std::vector<unsigned char> host = read_back(a, bytes);
  EXPECT_EQ(host.front(), 0x5a);
  EXPECT_EQ(host.back(), 0x5a);
  device.free_segment(a, bytes);
  EXPECT_EQ(device.get_counters().segment_allocs, 1u);
  EXPECT_EQ(device.get_counters().segment_frees, 1u);
}

TEST_F(cuda_backend_test, a_segment_beyond_the_device_is_zero_and_leaves_no_error) {
  cuda_backend device;
  EXPECT_EQ(device.allocate_segment(device.get_facts().capacity * 4), 0u);
  EXPECT_EQ(device.get_counters().failed_allocs, 1u);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(cuda_backend_test, unified_segments_are_one_pointer_for_host_and_device) {
  cuda_backend device(cuda_options{.memory = cuda_memory::unified});
  EXPECT_TRUE(device.get_facts().unified);
  EXPECT_EQ(device.get_facts().name, "cuda:0/managed");
  const std::size_t bytes = std::size_t{2} << 20;
  const address_t a = device.allocate_segment(bytes);
  ASSERT_NE(a, 0u);
  auto* host = static_cast<unsigned char*>(device.get_host_pointer(a));
  ASSERT_NE(host, nullptr);
  ASSERT_EQ(cudaMemset(host, 7, bytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(host[0], 7);
  EXPECT_EQ(host[bytes - 1], 7);
  device.free_segment(a, bytes);
}

TEST_F(cuda_backend_test, pinned_host_segments_are_host_memory_the_device_writes) {
  cuda_backend device(cuda_options{.memory = cuda_memory::pinned_host});
  EXPECT_EQ(device.get_memory(), cuda_memory::pinned_host);
  EXPECT_TRUE(device.get_facts().unified);
  EXPECT_FALSE(device.get_facts().virtual_memory);
  const std::size_t bytes = std::size_t{2} << 20;
  const address_t a = device.allocate_segment(bytes);
  ASSERT_NE(a, 0u);
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, reinterpret_cast<void*>(a)), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  ASSERT_EQ(cudaMemset(reinterpret_cast<void*>(a), 9, bytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(static_cast<unsigned char*>(device.get_host_pointer(a))[bytes / 2], 9);
  device.free_segment(a, bytes);
}

TEST_F(cuda_backend_test, streams_become_queues_once) {
  cuda_backend device(cuda_options{.queue_count = 3});
  cudaStream_t s1 = nullptr, s2 = nullptr, s3 = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s1), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&s2), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&s3), cudaSuccess);
  EXPECT_EQ(device.get_queue(nullptr), 0u);
  EXPECT_EQ(device.get_queue(s1), 1u);
  EXPECT_EQ(device.get_queue(s2), 2u);
  EXPECT_EQ(device.get_queue(s1), 1u);
  EXPECT_EQ(device.get_stream(2), s2);
  EXPECT_THROW(device.get_queue(s3), invalid_argument);
  EXPECT_THROW(device.get_queue(cudaStreamPerThread), invalid_argument);
  EXPECT_THROW(device.get_stream(3), invalid_argument);
  for (cudaStream_t s : {s1, s2, s3}) cudaStreamDestroy(s);
}

TEST_F(cuda_backend_test, fences_complete_in_order_when_the_stream_runs) {
  cuda_backend device;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const queue_id q = device.get_queue(stream);
  const std::uint64_t before = device.get_submitted(q);
  {
    stream_gate gate(stream);
    const std::uint64_t first = device.get_submitted(q);
    const std::uint64_t second = device.get_submitted(q);
    EXPECT_LT(before, first);
    EXPECT_LT(first, second);
    // The gate holds the stream: nothing after it has completed.
    EXPECT_LT(device.get_completed(q), first);
    gate.open();
    device.wait({q, first});
    EXPECT_GE(device.get_completed(q), first);
    device.wait({q, second});
    EXPECT_EQ(device.get_completed(q), second);
  }
  EXPECT_THROW(device.wait({q, 1000}), invalid_argument);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(cuda_backend_test, a_wait_returns_once_another_thread_lets_the_stream_run) {
  cuda_backend device;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const queue_id q = device.get_queue(stream);
  {
    stream_gate gate(stream);  // synchronizes its stream when it goes: before the destroy
    const std::uint64_t value = device.get_submitted(q);
    std::thread opener([&] { gate.open(); });
    device.wait({q, value});
    opener.join();
    EXPECT_EQ(device.get_completed(q), value);
  }
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(cuda_backend_test, events_are_pooled_not_made_per_fence) {
  cuda_backend device;
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t value = device.get_submitted(0);
    device.wait({0, value});
  }
  EXPECT_EQ(device.get_counters().events_recorded, 1000u);
  EXPECT_LE(device.get_counters().events_created, 2u);
}

TEST_F(cuda_backend_test, virtual_memory_maps_pages_into_a_reserved_range) {
  cuda_backend device;
  if (!device.get_facts().virtual_memory) GTEST_SKIP() << "the device has no virtual memory";
  const std::size_t page = device.get_facts().granularity;
  const std::size_t range = 8 * page;
  const address_t base = device.reserve_range(range);
  ASSERT_NE(base, 0u);
  std::vector<page_id> pages;
  for (int i = 0; i < 3; ++i) {
    pages.push_back(device.create_page(page));
    ASSERT_NE(pages.back(), 0u);
  }
  device.map(base, pages[0], page);                                  // one page ...
  device.set_access(base, page);                                     // ... made usable
  device.map_pages(base + page, std::span(pages).subspan(1), page);  // two, one access call
  EXPECT_EQ(device.get_counters().access_sets, 2u);
  EXPECT_EQ(device.get_counters().maps, 3u);
  ASSERT_EQ(cudaMemset(reinterpret_cast<void*>(base), 3, 3 * page), cudaSuccess);
  const std::vector<unsigned char> host = read_back(base, 3 * page);
  EXPECT_EQ(host[0], 3);
  EXPECT_EQ(host[3 * page - 1], 3);
  // A page survives unmapping: map it elsewhere in the range and read it there.
  device.unmap(base + 2 * page, page);
  device.map(base + 5 * page, pages[2], page);
  device.set_access(base + 5 * page, page);
  EXPECT_EQ(read_back(base + 5 * page, page)[page - 1], 3);
  device.unmap(base, 2 * page);
  device.unmap(base + 5 * page, page);
  for (page_id p : pages) device.release_page(p, page);
  device.release_range(base, range);
  EXPECT_EQ(device.get_counters().pages_released, 3u);
}

// The arena moves a page by mapping it at its new place and leaving the old mapping
// (a shadow) until that place is needed: one physical page at two addresses.
TEST_F(cuda_backend_test, one_page_mapped_at_two_addresses_holds_the_same_bytes) {
  cuda_backend device;
  if (!device.get_facts().virtual_memory) GTEST_SKIP() << "the device has no virtual memory";
  const std::size_t page = device.get_facts().granularity;
  const std::size_t range = 4 * page;
  const address_t base = device.reserve_range(range);
  ASSERT_NE(base, 0u);
  const page_id p = device.create_page(page);
  ASSERT_NE(p, 0u);
  device.map(base, p, page);
  device.set_access(base, page);
  device.map(base + 2 * page, p, page);
  device.set_access(base + 2 * page, page);
  ASSERT_EQ(cudaMemset(reinterpret_cast<void*>(base), 7, page), cudaSuccess);
  EXPECT_EQ(read_back(base + 2 * page, page)[page - 1], 7);
  // Unmapping one address leaves the other, and the bytes, as they were.
  device.unmap(base, page);
  ASSERT_EQ(cudaMemset(reinterpret_cast<void*>(base + 2 * page), 9, 1), cudaSuccess);
  const std::vector<unsigned char> host = read_back(base + 2 * page, page);
  EXPECT_EQ(host[0], 9);
  EXPECT_EQ(host[page - 1], 7);
  device.unmap(base + 2 * page, page);
  device.release_page(p, page);
  device.release_range(base, range);
}

TEST_F(cuda_backend_test, virtual_memory_rejects_sizes_off_the_granularity) {
  cuda_backend device;
  if (!device.get_facts().virtual_memory) GTEST_SKIP() << "the device has no virtual memory";
  EXPECT_THROW(device.create_page(4096), invalid_argument);
  EXPECT_THROW(device.reserve_range(4096), invalid_argument);
  cuda_backend host(cuda_options{.memory = cuda_memory::pinned_host});
  EXPECT_THROW(host.reserve_range(std::size_t{2} << 20), invalid_argument);
}

TEST_F(cuda_backend_test, transfers_fill_and_copy_run_on_the_stream) {
  cuda_backend device;
  const std::size_t bytes = std::size_t{2} << 20;
  const address_t a = device.allocate_segment(bytes);
  const address_t b = device.allocate_segment(bytes);
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  device.fill(a, 1024, 0x01020304u, 0);
  std::vector<std::uint32_t> words(256);
  device.copy_to_host(words.data(), a, 1024, 0);
  EXPECT_EQ(words[0], 0x01020304u);
  EXPECT_EQ(words[255], 0x01020304u);
  const bool flags[4] = {true, false, true, true};
  device.copy_to_device(a, flags, 4, 0, element_conversion::bool32);
  device.copy(b, a, 16, 0);
  std::uint32_t device_words[4] = {};
  device.copy_to_host(device_words, b, 16, 0);
  EXPECT_EQ(device_words[0], 1u);
  EXPECT_EQ(device_words[1], 0u);
  bool back[4] = {};
  device.copy_to_host(back, b, 4, 0, element_conversion::bool32);
  EXPECT_TRUE(back[0] && !back[1] && back[2] && back[3]);
  EXPECT_THROW(device.fill(a, 6, 0, 0), invalid_argument);
  device.free_segment(a, bytes);
  device.free_segment(b, bytes);
}

TEST_F(cuda_backend_test, an_unusable_device_is_a_clear_error) {
  try {
    cuda_backend device(cuda_options{.device = 1000});
    FAIL() << "expected cuda_error";
  } catch (const cuda_error& e) {
    EXPECT_NE(std::string(e.what()).find("[memkit::cuda_backend]"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("1000"), std::string::npos);
  }
}

}  // namespace
}  // namespace memkit
#endif

TEST(cuda_build, says_whether_the_cuda_backend_is_built) {
#if !MEMKIT_HAVE_CUDA
  GTEST_SKIP() << "the cuda backend is not built here (no CUDA toolkit at configure time)";
#else
  const memkit::cuda_availability a = memkit::check_cuda_device(0);
  if (!a.available) GTEST_SKIP() << "no CUDA device: " << a.reason;
  SUCCEED();
#endif
}
