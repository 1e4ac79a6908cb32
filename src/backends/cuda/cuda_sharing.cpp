// Sharing blocks with other processes. Virtual memory (arena pages, communication
// segments) travels as one POSIX file descriptor per physical allocation under the
// block, exported from handles retained at each mapping; the importer maps them
// back to back in a range of its own. cudaMalloc segments travel as a legacy IPC
// handle of the whole segment and the block's offset in it.
#include <unistd.h>

#include <cstring>

#include "backends/cuda/cuda_state.hpp"
#include "memkit/errors.hpp"

namespace memkit {

using cuda_detail::throw_cuda_error;

namespace {

[[noreturn]] void refuse(const char* function, const std::string& what) {
  throw invalid_argument(std::string("[memkit::cuda_backend::") + function + "] " + what);
}

void check(const cuda_detail::driver_api& api, const char* function, const char* call,
           CUresult result) {
  if (result != CUDA_SUCCESS) {
    throw cuda_error(std::string("[memkit::cuda_backend::") + function + "] " + call +
                     " failed: " + cuda_detail::describe(api, result));
  }
}

// The driver's context-bound calls (cuMemGetAddressRange) need a current context,
// which a thread that never used the runtime (the exporter's) does not have:
// cudaSetDevice makes the device's primary context current.
void make_current(int device, const char* function) {
  const cudaError_t error = cudaSetDevice(device);
  if (error != cudaSuccess) throw_cuda_error(function, "cudaSetDevice", error);
}

}  // namespace

shared_memory cuda_backend::export_memory(address_t address, std::size_t bytes) {
  state& s = *state_;
  if (s.memory != cuda_memory::device && s.memory != cuda_memory::communication) {
    refuse("export_memory", s.facts.name + ": only device and communication memory can be shared");
  }
  if (bytes == 0) refuse("export_memory", "an empty block cannot be shared");
  std::string why;
  const cuda_detail::driver_api* api = cuda_detail::get_driver_api(&why);
  if (!api) throw cuda_error("[memkit::cuda_backend::export_memory] " + why);
  cuda_detail::device_scope scope(s.options.device);
  make_current(s.options.device, "export_memory");
  shared_memory memory;
  memory.device = static_cast<std::uint32_t>(s.options.device);
  memory.size = bytes;
  memory.address = address;

  // The mappings under the block, if it is virtual memory of this backend.
  std::vector<std::pair<address_t, std::size_t>> pieces;
  {
    std::lock_guard lock(s.access_mutex);
    auto it = s.mapped.upper_bound(address);
    if (it != s.mapped.begin()) {
      --it;
      address_t covered = it->first;
      while (it != s.mapped.end() && it->first == covered && covered < address + bytes) {
        pieces.emplace_back(it->first, it->second);
        covered += it->second;
        ++it;
      }
      if (covered < address + bytes || pieces.front().first + pieces.front().second <= address) {
        pieces.clear();
      }
    }
  }
  if (!pieces.empty()) {
    if (!(s.page_properties.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
      refuse("export_memory", s.facts.name +
                                  ": its pages were not created exportable (set "
                                  "cuda_options::exportable, or use communication memory)");
    }
    memory.type = shared_memory::kind::cuda_virtual;
    memory.offset = address - pieces.front().first;
    for (const auto& [at, size] : pieces) {
      CUmemGenericAllocationHandle handle = 0;
      check(*api, "export_memory", "cuMemRetainAllocationHandle",
            api->mem_retain_allocation_handle(&handle, reinterpret_cast<void*>(at)));
      int fd = -1;
      const CUresult result = api->mem_export_to_shareable_handle(
          &fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      api->mem_release(handle);  // the retain's reference
      check(*api, "export_memory", "cuMemExportToShareableHandle", result);
      memory.fds.push_back(fd);
      memory.piece_bytes.push_back(size);
    }
    return memory;
  }
  if (s.memory != cuda_memory::device) {
    refuse("export_memory", std::to_string(bytes) + " bytes at " + std::to_string(address) +
                                " are not mapped by " + s.facts.name);
  }
  // A cudaMalloc segment: its handle, and where the block lies in it.
  CUdeviceptr base = 0;
  std::size_t size = 0;
  check(*api, "export_memory", "cuMemGetAddressRange",
        api->mem_get_address_range(&base, &size, static_cast<CUdeviceptr>(address)));
  if (address + bytes > base + size) {
    refuse("export_memory", "the block runs past the end of its segment");
  }
  cudaIpcMemHandle_t handle;
  const cudaError_t error = cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base));
  if (error != cudaSuccess) throw_cuda_error("export_memory", "cudaIpcGetMemHandle", error);
  static_assert(sizeof(handle) <= sizeof(memory.handle));
  std::memcpy(memory.handle, &handle, sizeof(handle));
  memory.type = shared_memory::kind::cuda_ipc;
  memory.offset = address - static_cast<address_t>(base);
  return memory;
}

address_t cuda_backend::import_memory(shared_memory& memory) {
  state& s = *state_;
  cuda_detail::device_scope scope(s.options.device);
  make_current(s.options.device, "import_memory");
  if (memory.type == shared_memory::kind::cuda_ipc) {
    memory.close_fds();
    // A process opens a segment once; later imports of it share that mapping.
    const std::string key(reinterpret_cast<const char*>(memory.handle), sizeof(cudaIpcMemHandle_t));
    std::lock_guard lock(s.import_mutex);
    auto open = s.legacy_opens.find(key);
    if (open == s.legacy_opens.end()) {
      cudaIpcMemHandle_t handle;
      std::memcpy(&handle, memory.handle, sizeof(handle));
      void* opened = nullptr;
      const cudaError_t error =
          cudaIpcOpenMemHandle(&opened, handle, cudaIpcMemLazyEnablePeerAccess);
      if (error != cudaSuccess) {
        cudaGetLastError();
        throw_cuda_error("import_memory", "cudaIpcOpenMemHandle", error);
      }
      open = s.legacy_opens
                 .emplace(key, cuda_detail::legacy_open{reinterpret_cast<address_t>(opened), 0})
                 .first;
    }
    open->second.imports++;
    const address_t address = open->second.base + memory.offset;
    cuda_detail::import_record& record = s.imports[address];
    record.count++;
    record.legacy = true;
    record.base = open->second.base;
    record.key = key;
    return address;
  }
  if (memory.type != shared_memory::kind::cuda_virtual) {
    memory.close_fds();
    refuse("import_memory", s.facts.name + " imports only CUDA descriptions");
  }
  std::string why;
  const cuda_detail::driver_api* api = cuda_detail::get_driver_api(&why);
  if (!api) throw cuda_error("[memkit::cuda_backend::import_memory] " + why);
  if (memory.fds.size() != memory.piece_bytes.size() || memory.fds.empty()) {
    memory.close_fds();
    refuse("import_memory", "the description's pieces and descriptors do not match");
  }
  cuda_detail::import_record record;
  record.count = 1;
  for (const std::uint64_t piece : memory.piece_bytes) record.bytes += piece;
  auto undo = [&](std::size_t mapped) {
    if (mapped) api->mem_unmap(static_cast<CUdeviceptr>(record.base), mapped);
    if (record.base) api->mem_address_free(static_cast<CUdeviceptr>(record.base), record.bytes);
    for (const CUmemGenericAllocationHandle h : record.handles) api->mem_release(h);
    memory.close_fds();
  };
  for (const int fd : memory.fds) {
    CUmemGenericAllocationHandle handle = 0;
    const CUresult result = api->mem_import_from_shareable_handle(
        &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (result != CUDA_SUCCESS) {
      undo(0);
      check(*api, "import_memory", "cuMemImportFromShareableHandle", result);
    }
    record.handles.push_back(handle);
  }
  memory.close_fds();  // the handles hold the memory now
  CUdeviceptr base = 0;
  CUresult result = api->mem_address_reserve(&base, record.bytes, 0, 0, 0);
  if (result != CUDA_SUCCESS) {
    undo(0);
    check(*api, "import_memory", "cuMemAddressReserve", result);
  }
  record.base = static_cast<address_t>(base);
  std::size_t mapped = 0;
  for (std::size_t i = 0; i < record.handles.size(); ++i) {
    result = api->mem_map(base + mapped, memory.piece_bytes[i], 0, record.handles[i], 0);
    if (result != CUDA_SUCCESS) {
      undo(mapped);
      check(*api, "import_memory", "cuMemMap", result);
    }
    mapped += memory.piece_bytes[i];
  }
  // The importing device and its peers (the device alone where it has no
  // virtual memory of its own set up).
  std::vector<CUmemAccessDesc> access = s.get_access();
  if (access.empty()) {
    CUmemAccessDesc own{};
    own.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    own.location.id = s.options.device;
    own.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access.push_back(own);
  }
  result = api->mem_set_access(base, record.bytes, access.data(), access.size());
  if (result != CUDA_SUCCESS) {
    undo(mapped);
    check(*api, "import_memory", "cuMemSetAccess", result);
  }
  const address_t address = record.base + memory.offset;
  std::lock_guard lock(s.import_mutex);
  s.imports[address] = std::move(record);
  return address;
}

void cuda_backend::close_import(address_t address) {
  state& s = *state_;
  cuda_detail::import_record record;
  {
    std::lock_guard lock(s.import_mutex);
    auto it = s.imports.find(address);
    if (it == s.imports.end()) {
      refuse("close_import", "nothing imported at " + std::to_string(address));
    }
    if (it->second.legacy) {
      record.legacy = true;
      auto open = s.legacy_opens.find(it->second.key);
      if (--it->second.count == 0) s.imports.erase(it);
      if (--open->second.imports > 0) return;
      record.base = open->second.base;
      s.legacy_opens.erase(open);
    } else {
      if (--it->second.count > 0) return;
      record = std::move(it->second);
      s.imports.erase(it);
    }
  }
  cuda_detail::device_scope scope(s.options.device);
  make_current(s.options.device, "close_import");
  if (record.legacy) {
    const cudaError_t error = cudaIpcCloseMemHandle(reinterpret_cast<void*>(record.base));
    if (error != cudaSuccess) throw_cuda_error("close_import", "cudaIpcCloseMemHandle", error);
    return;
  }
  const cuda_detail::driver_api& api = *cuda_detail::get_driver_api(nullptr);
  check(api, "close_import", "cuMemUnmap",
        api.mem_unmap(static_cast<CUdeviceptr>(record.base), record.bytes));
  for (const CUmemGenericAllocationHandle h : record.handles) {
    check(api, "close_import", "cuMemRelease", api.mem_release(h));
  }
  check(api, "close_import", "cuMemAddressFree",
        api.mem_address_free(static_cast<CUdeviceptr>(record.base), record.bytes));
}

}  // namespace memkit
