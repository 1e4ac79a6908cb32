// The same framework-style code on every backend present: allocate an array for a
// device, fill it from the host, run a kernel on the device, read the result back
// and print it, with the transfers each device made. The code never asks whether
// the device shares memory with the host.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "memkit/arrays/buffer.hpp"
#include "memkit/memkit.hpp"
#if MEMKIT_HAVE_VULKAN
#include "memkit/backends/vulkan.hpp"
#endif
#if MEMKIT_HAVE_CUDA
#include "memkit/backends/cuda.hpp"
#endif

using namespace memkit;
using namespace memkit::arrays;

// Framework code: one path for unified and discrete devices.
void run_framework_code(const std::string& label, backend& device, buffer_allocator_options opts) {
  allocator memory(device);
  buffer_allocator buffers(memory, opts);
  const std::size_t n = 10;
  buffer x = buffers.allocate(dtype::int32, n);
  buffer mask = buffers.allocate(dtype::boolean, n);
  buffer y = buffers.allocate(dtype::int32, n);

  // Fill from the host (a loader, say).
  auto xs = x.get_host_span<std::int32_t>(access::write);
  for (std::size_t i = 0; i < n; ++i) xs[i] = static_cast<std::int32_t>(i * i);
  auto ms = mask.get_host_span<bool>(access::write);
  for (std::size_t i = 0; i < n; ++i) ms[i] = i % 3 == 0;

  // Kernels on the device: y = x, then y[0..4) = -1; mask[0..4) = true (bools
  // may be 4 bytes there: the stored layout says).
  const address_t in = x.get_device(access::read);
  const address_t out = y.get_device(access::write);
  device_data& kernels = *find_capability<device_data>(device);
  kernels.copy(out, in, y.get_stored_bytes(), 0);
  kernels.fill(out, 4 * 4, 0xFFFFFFFFu, 0);
  const address_t m = mask.get_device(access::read_write);
  const std::size_t bool_bytes = mask.get_layout().device_element_bytes;
  kernels.fill(m, 4 * bool_bytes, bool_bytes == 4 ? 1u : 0x01010101u, 0);

  // Read back and print (host code: printing, checks).
  std::printf("%-16s y =", label.c_str());
  for (std::int32_t v : y.get_host_span<const std::int32_t>(access::read)) std::printf(" %d", v);
  std::printf("; mask =");
  for (bool v : mask.get_host_span<const bool>(access::read)) std::printf(" %d", v ? 1 : 0);
  const buffer_statistics s = buffers.get_statistics();
  std::printf(
      "\n%-16s %s; %llu uploads (%zu bytes), %llu downloads (%zu bytes); bool stored in %zu "
      "bytes\n",
      "", x.is_zero_copy() ? "zero-copy" : "host and device copies",
      static_cast<unsigned long long>(s.copies_to_device), s.bytes_to_device,
      static_cast<unsigned long long>(s.copies_to_host), s.bytes_to_host,
      mask.get_layout().device_element_bytes);
}

int main() {
  cpu_backend cpu;
  run_framework_code("cpu", cpu, {});
  sim_options sim_opts;
  sim_opts.store_contents = true;
  sim_backend sim(sim_opts);
  run_framework_code("sim", sim, {});
  run_framework_code("sim (webgpu)", sim, {get_webgpu_rules(sim.get_facts())});
#if MEMKIT_HAVE_VULKAN
  for (bool webgpu : {false, true}) {
    try {
      vulkan_backend vk(vulkan_options{.webgpu_compatible = webgpu});
      run_framework_code(webgpu ? "vulkan (webgpu)" : "vulkan", vk, {});
      if (!webgpu) std::printf("%-16s on %s\n", "", vk.get_facts().name.c_str());
    } catch (const vulkan_unavailable& e) {
      std::printf("vulkan: skipped (%s)\n", e.what());
    }
  }
#else
  std::printf("vulkan: not built (cmake/vulkan.cmake said why)\n");
#endif
#if MEMKIT_HAVE_CUDA
  if (const cuda_availability cuda = check_cuda_device(0); cuda.available) {
    for (const cuda_memory kind : {cuda_memory::unified, cuda_memory::device}) {
      cuda_backend gpu(cuda_options{.memory = kind});
      run_framework_code(kind == cuda_memory::unified ? "cuda (managed)" : "cuda (device)", gpu,
                         {});
    }
  } else {
    std::printf("cuda: skipped (%s)\n", cuda.reason.c_str());
  }
#else
  std::printf("cuda: not built (cmake/cuda.cmake said why)\n");
#endif
  return 0;
}
