// NCCL, loaded at run time (dlopen) rather than linked: memkit's GPU tests and the
// all-reduce benchmark start where the library is missing and say so. Only NCCL's
// header is needed to build (the CUDA toolkit's include folder has it). The library
// is looked for under MEMKIT_NCCL_LIBRARY, then as libnccl.so.2 on the loader's path
// (the Python package nvidia-nccl puts it in site-packages/nvidia/nccl/lib).
#pragma once

#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <string>
#include <type_traits>

namespace memkit::devices_detail {

struct nccl_library {
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetErrorString) get_error_string = nullptr;
  decltype(&::ncclCommInitAll) comm_init_all = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
  decltype(&::ncclCommRegister) comm_register = nullptr;
  decltype(&::ncclCommDeregister) comm_deregister = nullptr;
  decltype(&::ncclMemAlloc) mem_alloc = nullptr;
  decltype(&::ncclMemFree) mem_free = nullptr;
  std::string path;  // what was loaded
};

// The library's functions, loaded once; nullptr with `why` set when it is missing.
inline const nccl_library* load_nccl(std::string* why) {
  static nccl_library library;
  static std::string failure;
  static const bool loaded = [] {
    const char* chosen = std::getenv("MEMKIT_NCCL_LIBRARY");
    const std::string names[] = {chosen ? chosen : "", "libnccl.so.2", "libnccl.so"};
    void* handle = nullptr;
    for (const std::string& name : names) {
      if (name.empty()) continue;
      handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        library.path = name;
        break;
      }
    }
    if (!handle) {
      failure = "libnccl.so.2 not found (set MEMKIT_NCCL_LIBRARY or LD_LIBRARY_PATH)";
      return false;
    }
    bool ok = true;
    auto find = [&](auto& function, const char* symbol) {
      function =
          reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(handle, symbol));
      if (!function && ok) {
        failure = std::string(library.path) + " has no " + symbol;
        ok = false;
      }
    };
    find(library.get_version, "ncclGetVersion");
    find(library.get_error_string, "ncclGetErrorString");
    find(library.comm_init_all, "ncclCommInitAll");
    find(library.comm_destroy, "ncclCommDestroy");
    find(library.all_reduce, "ncclAllReduce");
    find(library.group_start, "ncclGroupStart");
    find(library.group_end, "ncclGroupEnd");
    find(library.comm_register, "ncclCommRegister");
    find(library.comm_deregister, "ncclCommDeregister");
    find(library.mem_alloc, "ncclMemAlloc");
    find(library.mem_free, "ncclMemFree");
    return ok;
  }();
  if (!loaded && why) *why = failure;
  return loaded ? &library : nullptr;
}

}  // namespace memkit::devices_detail
