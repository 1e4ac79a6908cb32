// Replays a trace through the allocator, touching EVICT_KIB of other memory before
// every call: the allocator's records leave the caches between calls, as they do in
// a framework that runs kernels' launches and the interpreter between them. A
// driver for bench/workloads/cold_misses.sh, which counts under callgrind's cache
// model the lines each call fetches.
//   cold_replay TRACE [segments] [EVICT_KIB]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "memkit/memkit.hpp"
#include "memkit/trace.hpp"

namespace {

[[gnu::noinline]] void evict(std::vector<char>& junk) {
  for (std::size_t i = 0; i < junk.size(); i += 64) junk[i] = static_cast<char>(junk[i] + 1);
  asm volatile("" ::: "memory");
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cold_replay TRACE [segments] [EVICT_KIB]\n");
    return 2;
  }
  const memkit::trace::trace_data trace = memkit::trace::read(argv[1]);
  memkit::allocator_options settings;
  if (argc > 2 && std::strcmp(argv[2], "segments") == 0)
    settings.policy = memkit::pool_policy::segments;
  std::vector<char> junk(static_cast<std::size_t>(argc > 3 ? std::atoi(argv[3]) : 96) << 10);
  memkit::sim_options options;
  options.capacity = std::size_t{1} << 40;
  options.queue_count = 8;
  memkit::sim_backend device(options);
  memkit::allocator alloc(device, settings);
  std::vector<memkit::address_t> address(trace.allocations, 0);
  for (const memkit::trace::event& e : trace.events) {
    evict(junk);
    if (e.kind == memkit::trace::action::allocate)
      address[e.block] = alloc.allocate(e.size, e.stream).address;
    else
      alloc.free(address[e.block]);
  }
  std::printf("%zu events\n", trace.events.size());
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "%s\n", error.what());
  return 1;
}
