// Several GPUs and processes on CUDA: peer access, sharing with a child process
// that writes and exits (or is killed), and all-reduce through NCCL on memkit
// buffers. Skipped, with the reason printed, without the GPUs (or NCCL) they need.
#include <gtest/gtest.h>

#if MEMKIT_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/driver_api.hpp"
#include "memkit/backends/cuda.hpp"
#include "memkit/devices.hpp"
#include "memkit/sharing.hpp"
#if __has_include(<nccl.h>)
#include "devices/nccl_library.hpp"
#endif

namespace memkit {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

int count_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

#define MEMKIT_SKIP_WITHOUT_GPUS(n)                                                             \
  do {                                                                                          \
    const ::memkit::cuda_availability memkit_cuda = ::memkit::check_cuda_device(0);             \
    if (!memkit_cuda.available) GTEST_SKIP() << "no CUDA device: " << memkit_cuda.reason;       \
    if (count_gpus() < (n)) GTEST_SKIP() << "needs " << (n) << " GPUs, found " << count_gpus(); \
  } while (false)

void finish(cuda_backend& device, queue_id queue = 0) {
  device.wait({queue, device.get_submitted(queue)});
}

// The access `device` has to the mapping at `address` (0: none).
unsigned long long get_access(address_t address, int device) {
  const cuda_detail::driver_api* api = cuda_detail::get_driver_api(nullptr);
  if (!api) return 0;
  CUmemLocation location{};
  location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  location.id = device;
  unsigned long long flags = 0;
  if (api->mem_get_access(&flags, &location, static_cast<CUdeviceptr>(address)) != CUDA_SUCCESS) {
    return 0;
  }
  return flags;
}

// Device 1 copies a block of device 0 into its own memory; the pattern must arrive.
void expect_copied_across(device_set& set, const device_allocation& on_zero,
                          std::uint32_t pattern) {
  auto& zero = static_cast<cuda_backend&>(set.get_backend(0));
  auto& one = static_cast<cuda_backend&>(set.get_backend(1));
  zero.fill(on_zero.address, on_zero.size, pattern, 0);
  finish(zero);
  const device_allocation on_one = set.allocate(1, on_zero.size);
  one.copy(on_one.address, on_zero.address, on_zero.size, 0);
  std::vector<std::uint32_t> host(on_zero.size / 4);
  one.copy_to_host(host.data(), on_one.address, on_zero.size, 0);
  for (std::size_t i = 0; i < host.size(); ++i) {
    ASSERT_EQ(host[i], pattern) << "word " << i;
  }
  set.free(on_one);
}

TEST(MultiGpuCuda, PeerAccessReachesVirtualMemoryMappedBeforeAndAfter) {
  MEMKIT_SKIP_WITHOUT_GPUS(2);
  cuda_backend zero(cuda_options{.device = 0});
  cuda_backend one(cuda_options{.device = 1});
  if (!zero.get_facts().virtual_memory) GTEST_SKIP() << "cuda:0 has no virtual memory";
  std::vector<backend*> devices{&zero, &one};
  device_set_options options;
  options.allocator.policy = pool_policy::arena;
  device_set set(devices, options);
  ASSERT_TRUE(set.can_access_peer(1, 0));
  const device_allocation before = set.allocate(0, 64 * kMiB + 4096);
  EXPECT_EQ(get_access(before.address, 0), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(get_access(before.address, 1), 0u);
  set.enable_peer_access(1, 0);
  EXPECT_EQ(get_access(before.address, 1), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  const device_allocation after = set.allocate(0, 32 * kMiB);
  EXPECT_EQ(get_access(after.address, 1), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  expect_copied_across(set, before, 0x5eed1234u);
  expect_copied_across(set, after, 0x0badf00du);
  set.free(before);
  set.free(after);
}

TEST(MultiGpuCuda, PeerAccessForCudaMallocSegments) {
  MEMKIT_SKIP_WITHOUT_GPUS(2);
  cuda_backend zero(cuda_options{.device = 0});
  cuda_backend one(cuda_options{.device = 1});
  std::vector<backend*> devices{&zero, &one};
  device_set_options options;
  options.allocator.policy = pool_policy::segments;
  options.peer_access = true;
  device_set set(devices, options);
  EXPECT_TRUE(set.is_peer_access_enabled(0, 1));
  EXPECT_TRUE(set.is_peer_access_enabled(1, 0));
  const device_allocation block = set.allocate(0, 24 * kMiB);
  expect_copied_across(set, block, 0x600dcafeu);
  set.free(block);
}

TEST(MultiGpuCuda, CommunicationSegmentsAreOnePhysicalAllocationEach) {
  MEMKIT_SKIP_WITHOUT_GPUS(1);
  const int gpus = count_gpus();
  cuda_backend zero(cuda_options{.device = 0, .memory = cuda_memory::communication});
  std::unique_ptr<cuda_backend> one;
  std::vector<backend*> devices{&zero};
  if (gpus > 1) {
    one = std::make_unique<cuda_backend>(
        cuda_options{.device = 1, .memory = cuda_memory::communication});
    devices.push_back(one.get());
  }
  EXPECT_FALSE(zero.get_facts().virtual_memory);  // the allocator sees segments
  EXPECT_FALSE(zero.get_facts().unified);
  device_set set(devices);
  const device_allocation block = set.allocate(0, 100 * kMiB + 512);
  const cuda_detail::driver_api* api = cuda_detail::get_driver_api(nullptr);
  ASSERT_NE(api, nullptr);
  CUdeviceptr base = 0;
  std::size_t size = 0;
  ASSERT_EQ(api->mem_get_address_range(&base, &size, block.address), CUDA_SUCCESS);
  EXPECT_LE(base, block.address);
  EXPECT_GE(base + size, block.address + block.size);  // NCCL maps [base, base + size)
  if (gpus > 1) {
    EXPECT_EQ(get_access(block.address, 1), 0u);
    set.enable_all_peer_access();
    EXPECT_EQ(get_access(block.address, 1), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    expect_copied_across(set, block, 0x12345678u);
  }
  set.free(block);
}

// --- Sharing with a child process -----------------------------------------------

constexpr std::uint32_t kChildPattern = 0xc0ffee00u;
constexpr std::uint32_t kParentPattern = 0x11111111u;

// The importing side, run by the parent test as a child process (this binary again).
TEST(MultiGpuCudaChild, ImportWriteAndReport) {
  const char* socket = std::getenv("MEMKIT_IPC_SOCKET");
  if (!socket) GTEST_SKIP() << "runs only as the importing child of MultiGpuCudaSharing";
  const std::uint64_t id = std::strtoull(std::getenv("MEMKIT_IPC_ID"), nullptr, 10);
  const int device = std::atoi(std::getenv("MEMKIT_IPC_DEVICE"));
  const int ready = std::atoi(std::getenv("MEMKIT_IPC_READY_FD"));
  const bool wait_to_be_killed = std::string(std::getenv("MEMKIT_IPC_MODE")) == "kill";
  cuda_backend own(cuda_options{.device = device});
  imported_memory imported(own, socket, id);
  own.fill(imported.get_address(), imported.get_size() / 4 * 4, kChildPattern, 0);
  finish(own);
  const char byte = 'w';
  ASSERT_EQ(::write(ready, &byte, 1), 1);
  if (wait_to_be_killed) {
    for (;;) ::pause();
  }
  imported.close();
}

struct sharing_case {
  pool_policy policy;
  bool kill_child;
  int importer_device;
};

class MultiGpuCudaSharing : public ::testing::TestWithParam<sharing_case> {};

pid_t start_importer(const std::string& socket, std::uint64_t id, const sharing_case& c,
                     int* ready_read) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    ::setenv("MEMKIT_IPC_SOCKET", socket.c_str(), 1);
    ::setenv("MEMKIT_IPC_ID", std::to_string(id).c_str(), 1);
    ::setenv("MEMKIT_IPC_DEVICE", std::to_string(c.importer_device).c_str(), 1);
    ::setenv("MEMKIT_IPC_READY_FD", std::to_string(ready[1]).c_str(), 1);
    ::setenv("MEMKIT_IPC_MODE", c.kill_child ? "kill" : "exit", 1);
    char filter[] = "--gtest_filter=MultiGpuCudaChild.ImportWriteAndReport";
    char name[] = "memkit_tests";
    char* arguments[] = {name, filter, nullptr};
    ::execv("/proc/self/exe", arguments);
    ::_exit(127);
  }
  ::close(ready[1]);
  *ready_read = ready[0];
  return child;
}

TEST_P(MultiGpuCudaSharing, ChildWritesAndTheBlockIsReusedOnlyAfter) {
  const sharing_case c = GetParam();
  MEMKIT_SKIP_WITHOUT_GPUS(c.importer_device + 1);
  cuda_backend zero(cuda_options{.device = 0, .exportable = true});
  if (c.policy == pool_policy::arena && !zero.get_facts().virtual_memory) {
    GTEST_SKIP() << "cuda:0 has no virtual memory";
  }
  std::vector<backend*> devices{&zero};
  device_set_options options;
  options.allocator.policy = c.policy;
  device_set set(devices, options);
  static std::atomic<int> next{0};
  memory_exporter exporter(
      set, "@memkit-cuda-sharing-" + std::to_string(::getpid()) + "-" + std::to_string(next++));
  const device_allocation block = set.allocate(0, 48 * kMiB + 4096);
  zero.fill(block.address, block.size, kParentPattern, 0);
  finish(zero);
  const std::uint64_t id = exporter.share(block);

  int ready = -1;
  const pid_t child = start_importer(exporter.get_socket_path(), id, c, &ready);
  ASSERT_GT(child, 0);
  pollfd waiting{ready, POLLIN, 0};
  const bool wrote = ::poll(&waiting, 1, 180'000) == 1;
  char byte = 0;
  const bool reported = wrote && ::read(ready, &byte, 1) == 1 && byte == 'w';
  ::close(ready);
  if (!reported) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    FAIL() << "the importing child did not report its write";
  }
  // The child's write is there.
  std::vector<std::uint32_t> host(block.size / 4);
  zero.copy_to_host(host.data(), block.address, block.size, 0);
  std::size_t wrong = 0;
  for (const std::uint32_t word : host) wrong += word != kChildPattern;
  EXPECT_EQ(wrong, 0u) << "of " << host.size() << " words";

  exporter.release(id);
  if (c.kill_child) {
    EXPECT_TRUE(exporter.is_held(id));
    EXPECT_EQ(exporter.get_importer_count(id), 1u);
    const device_allocation other = set.allocate(0, block.size);
    EXPECT_NE(other.address, block.address);  // not reused while the child holds it
    set.free(other);
    ASSERT_EQ(::kill(child, SIGKILL), 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  if (c.kill_child) {
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  } else {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  ASSERT_TRUE(exporter.wait_until_unimported(id, std::chrono::seconds(60)));
  EXPECT_FALSE(exporter.is_held(id));
  const device_allocation again = set.allocate(0, block.size);
  EXPECT_EQ(again.address, block.address);  // reused once the child is gone
  set.free(again);
}

INSTANTIATE_TEST_SUITE_P(Cases, MultiGpuCudaSharing,
                         ::testing::Values(sharing_case{pool_policy::arena, false, 0},
                                           sharing_case{pool_policy::arena, true, 0},
                                           sharing_case{pool_policy::segments, false, 0},
                                           sharing_case{pool_policy::segments, true, 0},
                                           sharing_case{pool_policy::arena, true, 1},
                                           sharing_case{pool_policy::segments, false, 1}),
                         [](const auto& param_info) {
                           const sharing_case& c = param_info.param;
                           return std::string(c.policy == pool_policy::arena ? "arena"
                                                                             : "segments") +
                                  (c.kill_child ? "_killed" : "_exits") + "_on_gpu" +
                                  std::to_string(c.importer_device);
                         });

// --- NCCL ------------------------------------------------------------------------

#if __has_include(<nccl.h>)
TEST(MultiGpuNccl, AllReduceOnMemkitBuffersRegisteredAndNot) {
  MEMKIT_SKIP_WITHOUT_GPUS(2);
  std::string why;
  const devices_detail::nccl_library* nccl = devices_detail::load_nccl(&why);
  if (!nccl) GTEST_SKIP() << "no NCCL: " << why;
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);  // NVLink multicast stays off on shared hosts

  cuda_backend zero(cuda_options{.device = 0, .memory = cuda_memory::communication});
  cuda_backend one(cuda_options{.device = 1, .memory = cuda_memory::communication});
  cuda_backend* ranks[2] = {&zero, &one};
  std::vector<backend*> devices{&zero, &one};
  device_set_options options;
  options.peer_access = true;
  device_set set(devices, options);

  ncclComm_t comms[2];
  const int list[2] = {0, 1};
  ASSERT_EQ(nccl->comm_init_all(comms, 2, list), ncclSuccess);
  cudaStream_t streams[2];
  queue_id queues[2];
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    queues[r] = ranks[r]->get_queue(streams[r]);
  }
  const std::size_t count = 16 * kMiB / 4 + 37;  // an odd count of floats
  const std::size_t bytes = count * sizeof(float);
  device_allocation send[2], receive[2];
  for (std::uint32_t r = 0; r < 2; ++r) {
    send[r] = set.allocate(r, bytes, queues[r]);
    receive[r] = set.allocate(r, bytes, queues[r]);
  }
  for (const bool registered : {false, true}) {
    SCOPED_TRACE(registered ? "registered" : "not registered");
    std::vector<float> host[2];
    for (int r = 0; r < 2; ++r) {
      host[r].resize(count);
      for (std::size_t i = 0; i < count; ++i) {
        host[r][i] =
            static_cast<float>((i * 7 + (registered ? 3 : 0)) % 1024) * static_cast<float>(r + 1);
      }
      ranks[r]->copy_to_device(send[r].address, host[r].data(), bytes, queues[r]);
      ranks[r]->fill(receive[r].address, bytes / 4 * 4, 0xffffffffu, queues[r]);  // NaN
    }
    void* handles[2][2] = {};
    if (registered) {
      for (int r = 0; r < 2; ++r) {
        ASSERT_EQ(nccl->comm_register(comms[r], reinterpret_cast<void*>(send[r].address), bytes,
                                      &handles[r][0]),
                  ncclSuccess);
        ASSERT_EQ(nccl->comm_register(comms[r], reinterpret_cast<void*>(receive[r].address), bytes,
                                      &handles[r][1]),
                  ncclSuccess);
      }
    }
    ASSERT_EQ(nccl->group_start(), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(nccl->all_reduce(reinterpret_cast<void*>(send[r].address),
                                 reinterpret_cast<void*>(receive[r].address), count, ncclFloat,
                                 ncclSum, comms[r], streams[r]),
                ncclSuccess);
    }
    ASSERT_EQ(nccl->group_end(), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
      std::vector<float> result(count);
      ranks[r]->copy_to_host(result.data(), receive[r].address, bytes, queues[r]);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i) wrong += result[i] != host[0][i] + host[1][i];
      EXPECT_EQ(wrong, 0u) << "rank " << r << ", of " << count;
    }
    if (registered) {
      for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(nccl->comm_deregister(comms[r], handles[r][0]), ncclSuccess);
        EXPECT_EQ(nccl->comm_deregister(comms[r], handles[r][1]), ncclSuccess);
      }
    }
  }
  for (int r = 0; r < 2; ++r) {
    set.free(send[r]);
    set.free(receive[r]);
    nccl->comm_destroy(comms[r]);
    cudaStreamDestroy(streams[r]);
  }
}
#endif

}  // namespace
}  // namespace memkit

#endif  // MEMKIT_HAVE_CUDA
