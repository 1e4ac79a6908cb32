// Transfers and fills, queued on a queue's stream. Conversions (bool32) run on the
// host through a temporary buffer in the device's layout.
#include <cstring>
#include <vector>

#include "backends/cuda/cuda_state.hpp"
#include "memkit/errors.hpp"

namespace memkit {

using cuda_detail::throw_cuda_error;

namespace {

std::size_t get_device_bytes(std::size_t host_bytes, element_conversion conversion) {
  return conversion == element_conversion::bool32 ? 4 * host_bytes : host_bytes;
}

}  // namespace

void cuda_backend::copy_to_device(address_t dst, const void* src, std::size_t host_bytes,
                                  queue_id queue, element_conversion conversion) {
  if (host_bytes == 0) return;
  // Queue 0 is the legacy default stream of the current device: make it this one.
  cuda_detail::device_scope scope(state_->options.device);
  cudaStream_t stream = get_stream(queue);
  std::vector<unsigned char> converted;
  if (conversion != element_conversion::none) {
    converted.resize(get_device_bytes(host_bytes, conversion));
    store_elements(converted.data(), src, host_bytes, conversion);
    src = converted.data();
  }
  // From pageable memory the call returns once the source is staged, so `src` (and
  // `converted`) may go at once; pinned sources are the caller's to keep until the
  // queue's work completes, as with any queued transfer.
  const cudaError_t error =
      cudaMemcpyAsync(reinterpret_cast<void*>(dst), src, get_device_bytes(host_bytes, conversion),
                      cudaMemcpyDefault, stream);
  if (error != cudaSuccess) throw_cuda_error("copy_to_device", "cudaMemcpyAsync", error);
  if (!converted.empty()) {
    // A pinned-host destination would be copied to without staging: keep the
    // temporary alive until the copy has run.
    const cudaError_t sync = cudaStreamSynchronize(stream);
    if (sync != cudaSuccess) throw_cuda_error("copy_to_device", "cudaStreamSynchronize", sync);
  }
}

void cuda_backend::copy_to_host(void* dst, address_t src, std::size_t host_bytes, queue_id queue,
                                element_conversion conversion) {
  if (host_bytes == 0) return;
  // Queue 0 is the legacy default stream of the current device: make it this one.
  cuda_detail::device_scope scope(state_->options.device);
  cudaStream_t stream = get_stream(queue);
  std::vector<unsigned char> converted(
      conversion == element_conversion::none ? 0 : get_device_bytes(host_bytes, conversion));
  void* target = converted.empty() ? dst : converted.data();
  cudaError_t error =
      cudaMemcpyAsync(target, reinterpret_cast<const void*>(src),
                      get_device_bytes(host_bytes, conversion), cudaMemcpyDefault, stream);
  if (error != cudaSuccess) throw_cuda_error("copy_to_host", "cudaMemcpyAsync", error);
  error = cudaStreamSynchronize(stream);
  if (error != cudaSuccess) throw_cuda_error("copy_to_host", "cudaStreamSynchronize", error);
  if (!converted.empty()) load_elements(dst, converted.data(), host_bytes, conversion);
}

void cuda_backend::fill(address_t dst, std::size_t bytes, std::uint32_t pattern, queue_id queue) {
  if (bytes % 4 != 0) {
    throw invalid_argument("[memkit::cuda_backend::fill] " + std::to_string(bytes) +
                           " bytes is not a multiple of 4");
  }
  if (bytes == 0) return;
  cuda_detail::device_scope scope(state_->options.device);
  cudaStream_t stream = get_stream(queue);
  unsigned char b[4];
  std::memcpy(b, &pattern, 4);
  if (b[0] == b[1] && b[1] == b[2] && b[2] == b[3]) {
    const cudaError_t error = cudaMemsetAsync(reinterpret_cast<void*>(dst), b[0], bytes, stream);
    if (error != cudaSuccess) throw_cuda_error("fill", "cudaMemsetAsync", error);
    return;
  }
  std::string why;
  const cuda_detail::driver_api* api = cuda_detail::get_driver_api(&why);
  if (!api) throw cuda_error("[memkit::cuda_backend::fill] " + why);
  const CUresult result = api->memset_d32_async(static_cast<CUdeviceptr>(dst), pattern, bytes / 4,
                                                reinterpret_cast<CUstream>(stream));
  if (result != CUDA_SUCCESS) {
    throw cuda_error("[memkit::cuda_backend::fill] cuMemsetD32Async failed: " +
                     cuda_detail::describe(*api, result));
  }
}

void cuda_backend::copy(address_t dst, address_t src, std::size_t bytes, queue_id queue) {
  if (bytes == 0) return;
  cuda_detail::device_scope scope(state_->options.device);
  const cudaError_t error =
      cudaMemcpyAsync(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes,
                      cudaMemcpyDefault, get_stream(queue));
  if (error != cudaSuccess) throw_cuda_error("copy", "cudaMemcpyAsync", error);
}

}  // namespace memkit
