#include "backends/cuda/driver_api.hpp"

#include <cuda_runtime_api.h>

#include <mutex>

namespace memkit::cuda_detail {

namespace {

template <class Function>
bool look_up(const char* symbol, Function& out, std::string& why) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t error =
      cudaGetDriverEntryPointByVersion(symbol, &function, 12000, cudaEnableDefault, &found);
  if (error != cudaSuccess || found != cudaDriverEntryPointSuccess || function == nullptr) {
    if (why.empty()) {
      why = std::string("the driver has no ") + symbol + " (" + cudaGetErrorName(error) + ")";
    }
    return false;
  }
  out = reinterpret_cast<Function>(function);
  return true;
}

}  // namespace

const driver_api* get_driver_api(std::string* why) {
  static driver_api api;
  static std::string failure;
  static bool loaded = false;
  static std::once_flag once;
  std::call_once(once, [] {
    bool ok = true;
    ok &= look_up("cuMemAddressReserve", api.mem_address_reserve, failure);
    ok &= look_up("cuMemAddressFree", api.mem_address_free, failure);
    ok &= look_up("cuMemCreate", api.mem_create, failure);
    ok &= look_up("cuMemRelease", api.mem_release, failure);
    ok &= look_up("cuMemMap", api.mem_map, failure);
    ok &= look_up("cuMemUnmap", api.mem_unmap, failure);
    ok &= look_up("cuMemSetAccess", api.mem_set_access, failure);
    ok &= look_up("cuMemGetAllocationGranularity", api.mem_get_allocation_granularity, failure);
    ok &= look_up("cuMemsetD32Async", api.memset_d32_async, failure);
    ok &= look_up("cuDeviceGetAttribute", api.device_get_attribute, failure);
    ok &= look_up("cuGetErrorName", api.get_error_name, failure);
    ok &= look_up("cuMemExportToShareableHandle", api.mem_export_to_shareable_handle, failure);
    ok &= look_up("cuMemImportFromShareableHandle", api.mem_import_from_shareable_handle, failure);
    ok &= look_up("cuMemRetainAllocationHandle", api.mem_retain_allocation_handle, failure);
    ok &= look_up("cuMemGetAddressRange", api.mem_get_address_range, failure);
    ok &= look_up("cuMemGetAccess", api.mem_get_access, failure);
    loaded = ok;
  });
  if (!loaded && why) *why = failure;
  return loaded ? &api : nullptr;
}

std::string describe(const driver_api& api, CUresult result) {
  const char* name = nullptr;
  if (api.get_error_name && api.get_error_name(result, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(static_cast<int>(result));
}

}  // namespace memkit::cuda_detail
