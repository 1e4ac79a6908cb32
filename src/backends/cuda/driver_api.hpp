// The driver functions the cuda backend needs, found through the runtime's entry
// points rather than linked: a program that links memkit then starts on machines
// with the toolkit but no driver (the CPU build machines), where CUDA reports
// "no device" instead of the loader failing.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

namespace memkit::cuda_detail {

struct driver_api {
  PFN_cuMemAddressReserve_v10020 mem_address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 mem_address_free = nullptr;
  PFN_cuMemCreate_v10020 mem_create = nullptr;
  PFN_cuMemRelease_v10020 mem_release = nullptr;
  PFN_cuMemMap_v10020 mem_map = nullptr;
  PFN_cuMemUnmap_v10020 mem_unmap = nullptr;
  PFN_cuMemSetAccess_v10020 mem_set_access = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 mem_get_allocation_granularity = nullptr;
  PFN_cuMemsetD32Async_v3020 memset_d32_async = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  // Sharing and peers (cuda_sharing.cpp, cuda_peers.cpp).
  PFN_cuMemExportToShareableHandle_v10020 mem_export_to_shareable_handle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 mem_import_from_shareable_handle = nullptr;
  PFN_cuMemRetainAllocationHandle_v11000 mem_retain_allocation_handle = nullptr;
  PFN_cuMemGetAddressRange_v3020 mem_get_address_range = nullptr;
  PFN_cuMemGetAccess_v10020 mem_get_access = nullptr;
};

// The driver's functions, looked up once; nullptr with `why` set when any is missing.
const driver_api* get_driver_api(std::string* why);

// "CUDA_ERROR_OUT_OF_MEMORY" for a driver result.
std::string describe(const driver_api& api, CUresult result);

}  // namespace memkit::cuda_detail
