// What the CUDA tests share: skipping without a device, and holding a stream.
#pragma once

#include <gtest/gtest.h>

#if MEMKIT_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <atomic>
#include <thread>

#include "memkit/backends/cuda.hpp"

#define MEMKIT_SKIP_WITHOUT_CUDA()                                                        \
  do {                                                                                    \
    const ::memkit::cuda_availability memkit_cuda = ::memkit::check_cuda_device(0);       \
    if (!memkit_cuda.available) GTEST_SKIP() << "no CUDA device: " << memkit_cuda.reason; \
  } while (false)

namespace memkit::testing {

// Holds a stream until opened: a host function that blocks the stream's work.
class stream_gate {
 public:
  explicit stream_gate(cudaStream_t stream) : stream_(stream) {
    EXPECT_EQ(cudaLaunchHostFunc(stream, &stream_gate::hold, this), cudaSuccess);
  }
  ~stream_gate() {
    open();
    cudaStreamSynchronize(stream_);  // the host function reads *this until it returns
  }
  void open() { opened_.store(true); }

 private:
  static void hold(void* self) {
    while (!static_cast<stream_gate*>(self)->opened_.load()) std::this_thread::yield();
  }
  cudaStream_t stream_;
  std::atomic<bool> opened_{false};
};

}  // namespace memkit::testing
#endif
