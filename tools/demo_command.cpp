// memkit demo: allocate and free a mix of sizes on a backend and print statistics.
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "commands.hpp"
#include "memkit/memkit.hpp"

namespace memkit::tools {

void add_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Allocate and free a mix of sizes and print statistics");
  auto backend_name = std::make_shared<std::string>("cpu");
  auto rounds = std::make_shared<int>(1000);
  cmd->add_option("--backend", *backend_name, "cpu or sim")->check(CLI::IsMember({"cpu", "sim"}));
  cmd->add_option("--rounds", *rounds, "allocate+free rounds")->check(CLI::Range(1, 1000000000));
  cmd->callback([backend_name, rounds] {
    std::unique_ptr<backend> device;
    if (*backend_name == "sim")
      device = std::make_unique<sim_backend>();
    else
      device = std::make_unique<cpu_backend>();
    allocator alloc(*device);
    std::mt19937_64 rng(42);
    std::vector<allocation> live;
    for (int i = 0; i < *rounds; ++i) {
      const std::size_t bytes = std::size_t{256} << (rng() % 14);  // 256 B .. 2 MiB
      live.push_back(alloc.allocate(bytes + rng() % bytes));
      if (live.size() > 64) {
        const std::size_t victim = rng() % live.size();
        alloc.free(live[victim].address);
        live[victim] = live.back();
        live.pop_back();
      }
    }
    const statistics mid = alloc.get_statistics();
    for (const allocation& a : live) alloc.free(a.address);
    const statistics s = alloc.calculate_statistics();
    std::printf("memkit demo on %s: %d allocations, 64 live at a time\n",
                device->get_facts().name.c_str(), *rounds);
    std::printf("  %-22s %14zu bytes\n", "peak active", s.peak_active_bytes);
    std::printf("  %-22s %14zu bytes\n", "peak reserved", s.peak_reserved_bytes);
    std::printf("  %-22s %14zu bytes (while 64 were live)\n", "active", mid.active_bytes);
    std::printf("  %-22s %14zu bytes (after freeing all)\n", "cached", s.cached_bytes);
    std::printf("  %-22s %14llu of %llu\n", "cache hits",
                static_cast<unsigned long long>(s.cache_hits),
                static_cast<unsigned long long>(s.allocations));
    std::printf("  %-22s %14llu allocs, %llu frees\n", "backend calls",
                static_cast<unsigned long long>(s.backend_allocations),
                static_cast<unsigned long long>(s.backend_frees));
  });
}

}  // namespace memkit::tools
