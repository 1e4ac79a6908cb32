// Virtual memory through the driver: address ranges, physical pages, mappings.
// Setting access is the expensive step (~30 us a call on an H200), so map_pages
// sets it once over a span of pages.
#include "backends/cuda/cuda_state.hpp"
#include "memkit/errors.hpp"

namespace memkit {

namespace {

const cuda_detail::driver_api& require_driver(const cuda_backend::state& s, const char* function) {
  if (!s.driver) {
    throw invalid_argument(std::string("[memkit::cuda_backend::") + function + "] " + s.facts.name +
                           " has no virtual memory (facts.virtual_memory is false)");
  }
  return *s.driver;
}

void check_driver(const cuda_backend::state& s, const char* function, const char* call,
                  CUresult result) {
  if (result != CUDA_SUCCESS) {
    throw cuda_error(std::string("[memkit::cuda_backend::") + function + "] " + call +
                     " failed: " + cuda_detail::describe(*s.driver, result));
  }
}

void check_granular(const cuda_backend::state& s, const char* function, const char* what,
                    std::size_t value) {
  if (value % s.facts.granularity != 0) {
    throw invalid_argument(std::string("[memkit::cuda_backend::") + function + "] " + what + " " +
                           std::to_string(value) + " is not a multiple of the granularity " +
                           std::to_string(s.facts.granularity));
  }
}

}  // namespace

address_t cuda_backend::reserve_range(std::size_t bytes) {
  const state& s = *state_;
  const cuda_detail::driver_api& api = require_driver(s, "reserve_range");
  check_granular(s, "reserve_range", "size", bytes);
  cuda_detail::device_scope scope(s.options.device);
  CUdeviceptr base = 0;
  if (api.mem_address_reserve(&base, bytes, s.facts.granularity, 0, 0) != CUDA_SUCCESS) return 0;
  return static_cast<address_t>(base);
}

void cuda_backend::release_range(address_t base, std::size_t bytes) {
  const state& s = *state_;
  const cuda_detail::driver_api& api = require_driver(s, "release_range");
  check_driver(s, "release_range", "cuMemAddressFree",
               api.mem_address_free(static_cast<CUdeviceptr>(base), bytes));
}

page_id cuda_backend::create_page(std::size_t bytes) {
  state& s = *state_;
  const cuda_detail::driver_api& api = require_driver(s, "create_page");
  check_granular(s, "create_page", "size", bytes);
  cuda_detail::device_scope scope(s.options.device);
  CUmemGenericAllocationHandle handle = 0;
  const CUresult result = api.mem_create(&handle, bytes, &s.page_properties, 0);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    s.counters.failed_allocs++;
    return 0;
  }
  check_driver(s, "create_page", "cuMemCreate", result);
  s.counters.pages_created++;
  return static_cast<page_id>(handle);
}

void cuda_backend::release_page(page_id page, std::size_t) {
  state& s = *state_;
  const cuda_detail::driver_api& api = require_driver(s, "release_page");
  // The memory goes back once the page is unmapped everywhere too.
  check_driver(s, "release_page", "cuMemRelease",
               api.mem_release(static_cast<CUmemGenericAllocationHandle>(page)));
  s.counters.pages_released++;
}

void cuda_backend::map(address_t at, page_id page, std::size_t bytes) {
  state& s = *state_;
  const cuda_detail::driver_api& api = require_driver(s, "map");
  check_granular(s, "map", "address", at);
  check_granular(s, "map", "size", bytes);
  check_driver(s, "map", "cuMemMap",
               api.mem_map(static_cast<CUdeviceptr>(at), bytes, 0,
                           static_cast<CUmemGenericAllocationHandle>(page), 0));
  s.note_mapped(at, bytes);
  s.counters.maps++;
}

void cuda_backend::set_access(address_t at, std::size_t bytes) {
  state& s = *state_;
  const cuda_detail::driver_api& api = require_driver(s, "set_access");
  check_granular(s, "set_access", "address", at);
  check_granular(s, "set_access", "size", bytes);
  // The device and every peer granted so far; a peer granted later sets its own.
  const std::vector<CUmemAccessDesc> access = s.get_access();
  check_driver(
      s, "set_access", "cuMemSetAccess",
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
  const cuda_detail::driver_api& api = require_driver(s, "unmap");
  check_granular(s, "unmap", "address", at);
  check_granular(s, "unmap", "size", bytes);
  s.forget_mapped(at, bytes);  // first: a peer being granted must not set access on it
  check_driver(s, "unmap", "cuMemUnmap", api.mem_unmap(static_cast<CUdeviceptr>(at), bytes));
  s.counters.unmaps++;
}

}  // namespace memkit
