#include <unistd.h>

#include <cstdlib>

#include "common/helpers.hpp"
#include "memkit/backends/cpu.hpp"

namespace memkit {

namespace {
constexpr std::size_t kPage = 4096;
}

cpu_backend::cpu_backend() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  facts_.name = "cpu";
  facts_.capacity = pages > 0 && page_size > 0
                        ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size)
                        : std::size_t{8} << 30;
  facts_.granularity = kPage;
  facts_.max_buffer = facts_.capacity;
  facts_.alignment = 256;
  facts_.max_wired = facts_.capacity;
  facts_.queue_count = 4;
  facts_.unified = true;
}

address_t cpu_backend::allocate_segment(std::size_t bytes) {
  void* p = std::aligned_alloc(kPage, common::round_up(bytes, kPage));
  return reinterpret_cast<address_t>(p);
}

void cpu_backend::free_segment(address_t address, std::size_t) {
  std::free(reinterpret_cast<void*>(address));
}

}  // namespace memkit
