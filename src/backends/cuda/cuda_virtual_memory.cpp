// Virtual memory through the driver: address ranges, physical pages, mappings.
// Setting access is the expensive step (~30 us a call on an H200), so map_pages
// sets it once over a span of pages.
#include "backends/cuda/cuda_state.hpp"
#include "memkit/errors.hpp"

namespace memkit {

const cuda_detail::driver_api& cuda_backend::state::require_driver(const char* function) const {
  if (!driver) {
    throw invalid_argument(std::string("[memkit::cuda_backend::") + function + "] " + facts.name +
                           " has no virtual memory (facts.virtual_memory is false)");
  }
  return *driver;
}

void cuda_backend::state::check_driver(const char* function, const char* call,
                                       CUresult result) const {
  if (result != CUDA_SUCCESS) {
    throw cuda_error(std::string("[memkit::cuda_backend::") + function + "] " + call +
                     " failed: " + cuda_detail::describe(*driver, result));
  }
}

void cuda_backend::state::check_granular(const char* function, const char* what,
                                         std::size_t value) const {
  if (value % facts.granularity != 0) {
    throw invalid_argument(std::string("[memkit::cuda_backend::") + function + "] " + what + " " +
                           std::to_string(value) + " is not a multiple of the granularity " +
                           std::to_string(facts.granularity));
  }
}

address_t cuda_backend::reserve_range(std::size_t bytes) {
  const state& s = *state_;
  const cuda_detail::driver_api& api = s.require_driver("reserve_range");
  s.check_granular("reserve_range", "size", bytes);
  cuda_detail::device_scope scope(s.options.device);
  CUdeviceptr base = 0;
  if (api.mem_address_reserve(&base, bytes, s.facts.granularity, 0, 0) != CUDA_SUCCESS) return 0;
  return static_cast<address_t>(base);
}

void cuda_backend::release_range(address_t base, std::size_t bytes) {
  const state& s = *state_;
  const cuda_detail::driver_api& api = s.require_driver("release_range");
  s.check_driver("release_range", "cuMemAddressFree",
                 api.mem_address_free(static_cast<CUdeviceptr>(base), bytes));
}

page_id cuda_backend::create_page(std::size_t bytes) {
  state& s = *state_;
  const cuda_detail::driver_api& api = s.require_driver("create_page");
  s.check_granular("create_page", "size", bytes);
  cuda_detail::device_scope scope(s.options.device);
  CUmemGenericAllocationHandle handle = 0;
  const CUresult result = api.mem_create(&handle, bytes, &s.page_properties, 0);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    s.counters.failed_allocs++;
    return 0;
  }
  s.check_driver("create_page", "cuMemCreate", result);
  s.counters.pages_created++;
  return static_cast<page_id>(handle);
}

void cuda_backend::release_page(page_id page, std::size_t) {
  state& s = *state_;
  const cuda_detail::driver_api& api = s.require_driver("release_page");
  // The memory goes back once the page is unmapped everywhere too.
  s.check_driver("release_page", "cuMemRelease",
                 api.mem_release(static_cast<CUmemGenericAllocationHandle>(page)));
  s.counters.pages_released++;
}

void cuda_backend::map(address_t at, page_id page, std::size_t bytes) {
  state& s = *state_;
  const cuda_detail::driver_api& api = s.require_driver("map");
  s.check_granular("map", "address", at);
  s.check_granular("map", "size", bytes);
  s.check_driver("map", "cuMemMap",
                 api.mem_map(static_cast<CUdeviceptr>(at), bytes, 0,
                             static_cast<CUmemGenericAllocationHandle>(page), 0));
  s.note_mapped(at, bytes);
  s.counters.maps++;
}

void cuda_backend::set_access(address_t at, std::size_t bytes) {
  state& s = *state_;
  const cuda_detail::driver_api& api = s.require_driver("set_access");
  s.check_granular("set_access", "address", at);
  s.check_granular("set_access", "size", bytes);
  // The device and every peer granted so far; a peer granted later sets its own.
  const std::vector<CUmemAccessDesc> access = s.get_access();
  s.check_driver(
      "set_access", "cuMemSetAccess",
      api.mem_set_access(static_cast<CUdeviceptr>(at), bytes, access.data(), access.size()));
  s.counters.access_sets++;
}

void cuda_backend::map_pages(address_t at, std::span<const page_id> pages, std::size_t page_bytes) {
  if (pages.empty()) return;
  std::size_t mapped = 0;
  try {
    for (const page_id page : pages) {
      map(at + mapped * page_bytes, page, page_bytes);
      ++mapped;
    }
    set_access(at, mapped * page_bytes);
  } catch (...) {
    // Leave nothing half done: unmap what this call mapped.
    if (mapped) {
      state_->forget_mapped(at, mapped * page_bytes);
      state_->driver->mem_unmap(static_cast<CUdeviceptr>(at), mapped * page_bytes);
    }
    throw;
  }
}

void cuda_backend::unmap(address_t at, std::size_t bytes) {
  state& s = *state_;
  const cuda_detail::driver_api& api = s.require_driver("unmap");
  s.check_granular("unmap", "address", at);
  s.check_granular("unmap", "size", bytes);
  s.forget_mapped(at, bytes);  // first: a peer being granted must not set access on it
  s.check_driver("unmap", "cuMemUnmap", api.mem_unmap(static_cast<CUdeviceptr>(at), bytes));
  s.counters.unmaps++;
}

}  // namespace memkit
