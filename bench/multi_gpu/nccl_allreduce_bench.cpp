// All-reduce bus bandwidth over the GPUs of one process (ncclCommInitAll), on
// buffers from ncclMemAlloc and from memkit, registered with ncclCommRegister and
// not, measured in one run with the variants interleaved.
//
//   memkit_nccl_bench [--sizes 64M,256M,1G,2G] [--iterations 20] [--repeats 10] [--gpus 2]
//
// Prints one line per size and variant: the median over repeats of the time of one
// all-reduce (host clock around `iterations` launches, streams synchronized) and the
// bus bandwidth, 2 (n - 1) / n * bytes / time, as nccl-tests counts it. Each repeat
// runs every variant once, starting at a different one. The result is checked (every
// rank's receive buffer holds the sum).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "devices/nccl_library.hpp"
#include "memkit/backends/cuda.hpp"
#include "memkit/devices.hpp"

namespace {

using memkit::devices_detail::nccl_library;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "memkit_nccl_bench: %s\n", what.c_str());
  std::exit(1);
}

void check_cuda(cudaError_t error, const char* call) {
  if (error != cudaSuccess) fail(std::string(call) + ": " + cudaGetErrorString(error));
}

void check_nccl(const nccl_library& nccl, ncclResult_t result, const char* call) {
  if (result != ncclSuccess) fail(std::string(call) + ": " + nccl.get_error_string(result));
}

std::size_t parse_size(const std::string& text) {
  std::size_t end = 0;
  double value = std::stod(text, &end);
  const char unit = end < text.size() ? text[end] : ' ';
  if (unit == 'K' || unit == 'k') value *= 1024;
  if (unit == 'M' || unit == 'm') value *= 1024 * 1024;
  if (unit == 'G' || unit == 'g') value *= 1024.0 * 1024 * 1024;
  return static_cast<std::size_t>(value);
}

// One variant's buffers: a send and a receive buffer per rank.
struct buffers {
  std::string name;
  bool registered = false;
  std::vector<void*> send, receive;
  std::vector<void*> handles;  // registrations
  std::function<void()> release;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes = {std::size_t{64} << 20, std::size_t{256} << 20,
                                    std::size_t{1} << 30, std::size_t{2} << 30};
  int iterations = 20, repeats = 10, gpus = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i], value = argv[i + 1];
    if (option == "--sizes") {
      sizes.clear();
      for (std::size_t at = 0; at <= value.size();) {
        const std::size_t comma = std::min(value.find(',', at), value.size());
        sizes.push_back(parse_size(value.substr(at, comma - at)));
        at = comma + 1;
      }
    } else if (option == "--iterations") {
      iterations = std::atoi(value.c_str());
    } else if (option == "--repeats") {
      repeats = std::atoi(value.c_str());
    } else if (option == "--gpus") {
      gpus = std::atoi(value.c_str());
    } else {
      fail("unknown option " + option);
    }
  }
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);  // NVLink multicast stays off on shared hosts
  std::string why;
  const nccl_library* loaded = memkit::devices_detail::load_nccl(&why);
  if (!loaded) fail("no NCCL: " + why);
  const nccl_library& nccl = *loaded;
  int version = 0;
  nccl.get_version(&version);
  int available = 0;
  check_cuda(cudaGetDeviceCount(&available), "cudaGetDeviceCount");
  if (available < gpus)
    fail("needs " + std::to_string(gpus) + " GPUs, found " + std::to_string(available));
  std::printf("NCCL %d (%s), %d GPUs, NCCL_NVLS_ENABLE=%s\n", version, nccl.path.c_str(), gpus,
              std::getenv("NCCL_NVLS_ENABLE"));

  std::vector<int> list(gpus);
  for (int r = 0; r < gpus; ++r) list[r] = r;
  std::vector<ncclComm_t> comms(gpus);
  check_nccl(nccl, nccl.comm_init_all(comms.data(), gpus, list.data()), "ncclCommInitAll");
  std::vector<cudaStream_t> streams(gpus);
  for (int r = 0; r < gpus; ++r) {
    check_cuda(cudaSetDevice(r), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), "cudaStreamCreate");
  }

  // memkit: communication memory (what NCCL registers) and the default arena.
  std::vector<std::unique_ptr<memkit::cuda_backend>> communication, arena;
  std::vector<memkit::backend*> communication_devices, arena_devices;
  for (int r = 0; r < gpus; ++r) {
    communication.push_back(std::make_unique<memkit::cuda_backend>(
        memkit::cuda_options{.device = r, .memory = memkit::cuda_memory::communication}));
    communication_devices.push_back(communication.back().get());
    arena.push_back(std::make_unique<memkit::cuda_backend>(memkit::cuda_options{.device = r}));
    arena_devices.push_back(arena.back().get());
  }
  memkit::device_set_options options;
  options.peer_access = true;
  memkit::device_set communication_set(communication_devices, options);
  memkit::device_set arena_set(arena_devices, options);

  std::printf("%12s  %-28s %12s %12s\n", "bytes", "buffers", "time (us)", "busbw (GB/s)");
  for (const std::size_t bytes : sizes) {
    const std::size_t count = bytes / sizeof(float);
    std::vector<buffers> variants;
    auto add_nccl = [&](bool registered) {
      buffers b;
      b.name = registered ? "ncclMemAlloc, registered" : "ncclMemAlloc";
      b.registered = registered;
      for (int r = 0; r < gpus; ++r) {
        check_cuda(cudaSetDevice(r), "cudaSetDevice");
        void *send = nullptr, *receive = nullptr;
        check_nccl(nccl, nccl.mem_alloc(&send, bytes), "ncclMemAlloc");
        check_nccl(nccl, nccl.mem_alloc(&receive, bytes), "ncclMemAlloc");
        b.send.push_back(send);
        b.receive.push_back(receive);
      }
      b.release = [&nccl, send = b.send, receive = b.receive] {
        for (void* p : send) nccl.mem_free(p);
        for (void* p : receive) nccl.mem_free(p);
      };
      variants.push_back(std::move(b));
    };
    auto add_memkit = [&](memkit::device_set& set, const char* name, bool registered) {
      buffers b;
      b.name = name;
      b.registered = registered;
      std::vector<memkit::device_allocation> blocks;
      for (int r = 0; r < gpus; ++r) {
        blocks.push_back(set.allocate(static_cast<std::uint32_t>(r), bytes));
        blocks.push_back(set.allocate(static_cast<std::uint32_t>(r), bytes));
        b.send.push_back(reinterpret_cast<void*>(blocks[blocks.size() - 2].address));
        b.receive.push_back(reinterpret_cast<void*>(blocks.back().address));
      }
      b.release = [&set, blocks] {
        for (const auto& block : blocks) set.free(block);
      };
      variants.push_back(std::move(b));
    };
    add_nccl(true);
    add_memkit(communication_set, "memkit communication, registered", true);
    add_nccl(false);
    add_memkit(communication_set, "memkit communication", false);
    add_memkit(arena_set, "memkit arena", false);

    // 1.0f on every rank: the sum is the number of ranks. Never time zeros.
    const std::vector<float> ones(count, 1.0f);
    for (buffers& b : variants) {
      for (int r = 0; r < gpus; ++r) {
        check_cuda(cudaSetDevice(r), "cudaSetDevice");
        check_cuda(cudaMemcpy(b.send[r], ones.data(), count * sizeof(float), cudaMemcpyDefault),
                   "cudaMemcpy");
        if (b.registered) {
          void* handle = nullptr;
          check_nccl(nccl, nccl.comm_register(comms[r], b.send[r], bytes, &handle),
                     "ncclCommRegister");
          b.handles.push_back(handle);
          check_nccl(nccl, nccl.comm_register(comms[r], b.receive[r], bytes, &handle),
                     "ncclCommRegister");
          b.handles.push_back(handle);
        }
      }
    }
    auto launch = [&](const buffers& b) {
      check_nccl(nccl, nccl.group_start(), "ncclGroupStart");
      for (int r = 0; r < gpus; ++r) {
        check_nccl(nccl,
                   nccl.all_reduce(b.send[r], b.receive[r], count, ncclFloat, ncclSum, comms[r],
                                   streams[r]),
                   "ncclAllReduce");
      }
      check_nccl(nccl, nccl.group_end(), "ncclGroupEnd");
    };
    auto synchronize = [&] {
      for (int r = 0; r < gpus; ++r) check_cuda(cudaStreamSynchronize(streams[r]), "sync");
    };
    std::vector<std::vector<double>> times(variants.size());
    for (int repeat = 0; repeat < repeats; ++repeat) {
      // Each repeat starts at another variant, so no variant always follows the same one.
      for (std::size_t k = 0; k < variants.size(); ++k) {
        const std::size_t v = (k + static_cast<std::size_t>(repeat)) % variants.size();
        for (int i = 0; i < 5; ++i) launch(variants[v]);  // warm up
        synchronize();
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < iterations; ++i) launch(variants[v]);
        synchronize();
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        times[v].push_back(elapsed.count() / iterations);
      }
    }
    for (std::size_t v = 0; v < variants.size(); ++v) {
      buffers& b = variants[v];
      // Check: every rank's receive buffer holds the sum, gpus, at its ends and middle.
      for (int r = 0; r < gpus; ++r) {
        for (const std::size_t at : {std::size_t{0}, count / 2, count - 1}) {
          float value = 0;
          check_cuda(cudaMemcpy(&value, static_cast<float*>(b.receive[r]) + at, sizeof(float),
                                cudaMemcpyDefault),
                     "cudaMemcpy");
          if (value != static_cast<float>(gpus)) {
            fail(b.name + ": rank " + std::to_string(r) + " element " + std::to_string(at) +
                 " is " + std::to_string(value));
          }
        }
      }
      std::vector<double> t = times[v];
      std::sort(t.begin(), t.end());
      const double median = t[t.size() / 2];
      const double bus = 2.0 * (gpus - 1) / gpus * static_cast<double>(bytes) / median / 1e9;
      std::printf("%12zu  %-32s %10.1f %12.1f   (min %.1f us, max %.1f us)\n", bytes,
                  b.name.c_str(), median * 1e6, bus, t.front() * 1e6, t.back() * 1e6);
      for (std::size_t h = 0; h < b.handles.size(); ++h) {
        nccl.comm_deregister(comms[h / 2], b.handles[h]);
      }
      b.release();
    }
  }
  for (int r = 0; r < gpus; ++r) {
    nccl.comm_destroy(comms[r]);
    cudaStreamDestroy(streams[r]);
  }
  return 0;
}
