// See torch_abi.hpp.
#include "torch_abi.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <typeinfo>

namespace memkit::torch_abi {

namespace {

// The vtable copy override_methods made (its address point), null before.
std::atomic<const void* const*> overridden{nullptr};

}  // namespace

std::pair<int, int> get_torch_version(const void* symbol) {
  Dl_info info{};
  if (!dladdr(symbol, &info) || !info.dli_fname) return {0, 0};
  // .../torch/lib/libtorch_cuda.so -> .../torch/version.py
  std::string path = info.dli_fname;
  for (int up = 0; up < 2; ++up) {
    const std::size_t slash = path.rfind('/');
    if (slash == std::string::npos) return {0, 0};
    path.resize(slash);
  }
  std::ifstream file(path + "/version.py");
  for (std::string line; std::getline(file, line);) {
    if (line.rfind("__version__", 0) != 0) continue;
    const std::size_t quote = line.find_first_of("'\"");
    int major = 0, minor = 0;
    if (quote != std::string::npos &&
        std::sscanf(line.c_str() + quote + 1, "%d.%d", &major, &minor) == 2)
      return {major, minor};
  }
  return {0, 0};
}

std::vector<std::string> override_methods(void* object, const void* vtable,
                                          const std::vector<void*>& libraries,
                                          const std::vector<method>& methods) {
  static std::mutex once;
  std::lock_guard lock(once);
  std::vector<std::string> missing;
  for (const method& m : methods) missing.emplace_back(m.name);
  // The vtable's size is its symbol's: a vtable is as long as its class's virtual methods.
  Dl_info info{};
  void* symbol_entry = nullptr;  // the vtable's ElfW(Sym)
  if (overridden.load() || !dladdr1(vtable, &info, &symbol_entry, RTLD_DL_SYMENT) || !symbol_entry)
    return missing;
  const auto* symbol = static_cast<const ElfW(Sym)*>(symbol_entry);
  if (symbol->st_size < 3 * sizeof(void*)) return missing;
  const std::size_t entries = symbol->st_size / sizeof(void*);
  // Kept for the process's life: the object points into it from now on.
  auto* copy = new const void*[entries];
  std::memcpy(copy, vtable, entries * sizeof(void*));
  missing.clear();
  for (const method& m : methods) {
    const void* original = nullptr;
    for (void* library : libraries) {
      if (!original) original = dlsym(library, m.name);
    }
    bool replaced = false;
    // Past the offset-to-top and type-info entries: the function pointers.
    for (std::size_t i = 2; original && i < entries; ++i) {
      const std::ptrdiff_t slot = static_cast<std::ptrdiff_t>(i) + m.offset;
      if (copy[i] != original || slot < 2 || slot >= static_cast<std::ptrdiff_t>(entries)) continue;
      copy[slot] = m.function;
      replaced = true;
    }
    if (!replaced) missing.emplace_back(m.name);
  }
  *static_cast<const void**>(object) = copy + 2;
  overridden.store(copy + 2);
  return missing;
}

bool has_overridden_vtable(const void* object) {
  const void* const* copy = overridden.load();
  return copy && *static_cast<const void* const*>(object) == copy;
}

void throw_out_of_memory(const std::string& message) {
  // c10::Error's constructor Error(SourceLocation, std::string), then the object gets
  // OutOfMemoryError's vtable: that class adds nothing to Error but its type.
  struct source_location {  // c10::SourceLocation
    const char* function;
    const char* file;
    std::uint32_t line;
  };
  using constructor = void (*)(void* self, source_location where, std::string message);
  struct symbols {
    constructor construct = nullptr;
    const char* vtable = nullptr;
    std::type_info* type = nullptr;
  };
  static const symbols found = [] {
    symbols s;
    void* c10 = dlopen("libc10.so", RTLD_NOW | RTLD_NOLOAD);
    void* c10_cuda = dlopen("libc10_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    if (!c10 || !c10_cuda) return s;  // no PyTorch in this process (kept open otherwise)
    s.construct =
        reinterpret_cast<constructor>(dlsym(c10,
                                            "_ZN3c105ErrorC1ENS_14SourceLocationENSt7__"
                                            "cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"));
    s.vtable = static_cast<const char*>(dlsym(c10_cuda, "_ZTVN3c1016OutOfMemoryErrorE"));
    s.type = static_cast<std::type_info*>(dlsym(c10_cuda, "_ZTIN3c1016OutOfMemoryErrorE"));
    return s;
  }();
  if (!found.construct || !found.vtable || !found.type) return;
  // c10::Error is 128 bytes in PyTorch 2.11; room for more.
  constexpr std::size_t kErrorBytes = 512;
  void* error = __cxxabiv1::__cxa_allocate_exception(kErrorBytes);
  try {
    found.construct(error, {"memkit_torch_malloc", __FILE__, __LINE__}, message);
  } catch (...) {
    __cxxabiv1::__cxa_free_exception(error);
    throw;
  }
  *static_cast<const void**>(error) = found.vtable + 2 * sizeof(void*);
  // Its complete-object destructor: the first slot (std::exception's first virtual).
  auto destroy = [](void* e) {
    using destructor = void (*)(void*);
    (*static_cast<destructor* const*>(e))[0](e);
  };
  __cxxabiv1::__cxa_throw(error, found.type, destroy);
}

}  // namespace memkit::torch_abi
