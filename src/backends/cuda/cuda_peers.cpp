// Peer access and the mappings it must reach: every mapping of this backend
// (arena pages, communication segments) is kept, so that granting a peer later sets
// its access on what is mapped already; set_access covers what is mapped after.
#include <cstdio>
#include <iterator>

#include "backends/cuda/cuda_state.hpp"
#include "common/helpers.hpp"
#include "memkit/errors.hpp"

namespace memkit {

using cuda_detail::throw_cuda_error;

void cuda_backend::state::note_mapped(address_t at, std::size_t bytes) {
  std::lock_guard lock(access_mutex);
  mapped[at] = bytes;
}

void cuda_backend::state::forget_mapped(address_t at, std::size_t bytes) {
  std::lock_guard lock(access_mutex);
  const address_t end = at + bytes;
  auto it = mapped.lower_bound(at);
  if (it != mapped.begin() && std::prev(it)->first + std::prev(it)->second > at) --it;
  while (it != mapped.end() && it->first < end) {
    const address_t first = it->first;
    const address_t last = it->first + it->second;
    it = mapped.erase(it);
    // Keep the parts of a mapping outside [at, end).
    if (first < at) mapped[first] = at - first;
    if (last > end) mapped[end] = last - end;
  }
}

std::vector<CUmemAccessDesc> cuda_backend::state::get_access() const {
  std::lock_guard lock(access_mutex);
  return access;
}

address_t cuda_backend::state::allocate_communication_segment(std::size_t bytes) {
  const cuda_detail::driver_api& api = *driver;
  const std::size_t g = facts.granularity;
  bytes = common::round_up(bytes, g);
  cuda_detail::device_scope scope(options.device);
  CUmemGenericAllocationHandle handle = 0;
  CUresult result = api.mem_create(&handle, bytes, &page_properties, 0);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    counters.failed_allocs++;
    return 0;
  }
  if (result != CUDA_SUCCESS) {
    throw cuda_error("[memkit::cuda_backend::allocate_segment] cuMemCreate failed: " +
                     cuda_detail::describe(api, result));
  }
  CUdeviceptr base = 0;
  result = api.mem_address_reserve(&base, bytes, g, 0, 0);
  if (result == CUDA_SUCCESS) {
    result = api.mem_map(base, bytes, 0, handle, 0);
    if (result != CUDA_SUCCESS) api.mem_address_free(base, bytes);
  }
  if (result != CUDA_SUCCESS) {
    api.mem_release(handle);
    throw cuda_error(
        "[memkit::cuda_backend::allocate_segment] mapping a communication segment "
        "failed: " +
        cuda_detail::describe(api, result));
  }
  {
    std::lock_guard lock(access_mutex);
    mapped[base] = bytes;
    communication_segments[base] = handle;
  }
  const std::vector<CUmemAccessDesc> granted = get_access();
  result = api.mem_set_access(base, bytes, granted.data(), granted.size());
  if (result != CUDA_SUCCESS) {
    free_communication_segment(base);
    throw cuda_error("[memkit::cuda_backend::allocate_segment] cuMemSetAccess failed: " +
                     cuda_detail::describe(api, result));
  }
  counters.segment_allocs++;
  counters.maps++;
  counters.access_sets++;
  return static_cast<address_t>(base);
}

void cuda_backend::state::free_communication_segment(address_t base) {
  std::size_t bytes = 0;
  CUmemGenericAllocationHandle handle = 0;
  {
    std::lock_guard lock(access_mutex);
    auto segment = communication_segments.find(base);
    if (segment == communication_segments.end()) {
      std::fprintf(stderr, "[memkit::cuda_backend::free_segment] no communication segment at %p\n",
                   reinterpret_cast<void*>(base));
      return;
    }
    handle = segment->second;
    bytes = mapped.at(base);
    communication_segments.erase(segment);
    mapped.erase(base);
  }
  const cuda_detail::driver_api& api = *driver;
  // Called from destructors: report rather than throw.
  const CUresult results[] = {api.mem_unmap(base, bytes), api.mem_release(handle),
                              api.mem_address_free(base, bytes)};
  for (const CUresult result : results) {
    if (result != CUDA_SUCCESS && result != CUDA_ERROR_DEINITIALIZED) {
      std::fprintf(stderr, "[memkit::cuda_backend::free_segment] releasing %p failed: %s\n",
                   reinterpret_cast<void*>(base), cuda_detail::describe(api, result).c_str());
    }
  }
  counters.segment_frees++;
  counters.unmaps++;
}

bool cuda_backend::can_grant_access(const backend& accessor) const {
  const auto* peer = dynamic_cast<const cuda_backend*>(&accessor);
  if (!peer) return false;
  const int owner = get_device();
  const int device = peer->get_device();
  if (device == owner) return true;
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, device, owner) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return can != 0;
}

void cuda_backend::grant_access(backend& accessor) {
  state& s = *state_;
  if (!can_grant_access(accessor)) {
    throw invalid_argument("[memkit::cuda_backend::grant_access] " + accessor.get_facts().name +
                           " cannot reach the memory of " + s.facts.name);
  }
  const int owner = get_device();
  const int device = static_cast<const cuda_backend&>(accessor).get_device();
  if (device == owner) return;
  {
    // cudaMalloc memory: the accessor's context may reach all of the owner's.
    cuda_detail::device_scope scope(device);
    const cudaError_t error = cudaDeviceEnablePeerAccess(owner, 0);
    if (error == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();
    } else if (error != cudaSuccess) {
      throw_cuda_error("grant_access", "cudaDeviceEnablePeerAccess", error);
    }
  }
  if (!s.driver) return;
  // Virtual memory: the accessor's location on every mapping, now and from now on.
  // The lock is held across the driver calls so that no mapping is unmapped under
  // them (unmap forgets a mapping before unmapping it); this is a rare call.
  std::lock_guard lock(s.access_mutex);
  for (const CUmemAccessDesc& granted : s.access) {
    if (granted.location.id == device) return;
  }
  CUmemAccessDesc peer = s.access.front();
  peer.location.id = device;
  s.access.push_back(peer);
  auto it = s.mapped.begin();
  while (it != s.mapped.end()) {
    const address_t run = it->first;
    address_t end = it->first + it->second;
    // Arena pages lie in one reserved range: set them a run at a time. Communication
    // segments each have a range of their own: one at a time.
    for (++it; it != s.mapped.end() && it->first == end && s.communication_segments.empty(); ++it)
      end += it->second;
    const CUresult result =
        s.driver->mem_set_access(static_cast<CUdeviceptr>(run), end - run, &peer, 1);
    if (result != CUDA_SUCCESS) {
      throw cuda_error("[memkit::cuda_backend::grant_access] cuMemSetAccess for " +
                       accessor.get_facts().name +
                       " failed: " + cuda_detail::describe(*s.driver, result));
    }
    s.counters.access_sets++;
  }
}

}  // namespace memkit
