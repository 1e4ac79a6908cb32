// The simulated device's virtual-memory primitive: address ranges, physical pages
// and mappings, checked and counted, never touched.
#include <iterator>
#include <string>

#include "memkit/backends/sim.hpp"
#include "memkit/errors.hpp"

namespace memkit {

namespace {
[[noreturn]] void refuse(const char* function, const std::string& what) {
  throw invalid_argument(std::string("[memkit::sim_backend::") + function + "] " + what);
}
}  // namespace

address_t sim_backend::reserve_range(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const std::size_t g = facts_.granularity;
  if (bytes == 0 || bytes % g) refuse("reserve_range", "size is not a multiple of the granularity");
  const address_t base = next_address_;
  next_address_ += bytes + g;
  ranges_.emplace(base, bytes);
  counters_.ranges_reserved++;
  counters_.simulated_ns += options_.reserve_ns;
  return base;
}

void sim_backend::release_range(address_t base, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  auto it = ranges_.find(base);
  if (it == ranges_.end() || it->second != bytes) refuse("release_range", "no such range");
  auto m = mappings_.lower_bound(base);
  if (m != mappings_.end() && m->first < base + bytes) refuse("release_range", "pages still mapped");
  ranges_.erase(it);
}

page_id sim_backend::create_page(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes == 0 || bytes % facts_.granularity) refuse("create_page", "size is not a multiple of the granularity");
  if (counters_.reserved_bytes + counters_.page_bytes + bytes > facts_.capacity) {
    counters_.failed_allocs++;
    return 0;
  }
  const page_id page = next_page_++;
  pages_.emplace(page, bytes);
  counters_.pages_created++;
  counters_.page_bytes += bytes;
  const std::size_t held = counters_.reserved_bytes + counters_.page_bytes;
  if (held > counters_.peak_reserved_bytes) counters_.peak_reserved_bytes = held;
  counters_.simulated_ns += options_.create_page_ns;
  return page;
}

void sim_backend::release_page(page_id page, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  auto it = pages_.find(page);
  if (it == pages_.end() || it->second != bytes) refuse("release_page", "no such page");
  if (mapped_pages_.count(page)) refuse("release_page", "the page is still mapped");
  pages_.erase(it);
  counters_.pages_released++;
  counters_.page_bytes -= bytes;
  counters_.simulated_ns += options_.release_page_ns;
}

void sim_backend::map(address_t at, page_id page, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const std::size_t g = facts_.granularity;
  auto p = pages_.find(page);
  if (p == pages_.end() || p->second != bytes) refuse("map", "no page of that size");
  auto r = ranges_.upper_bound(at);
  if (r == ranges_.begin() || at % g || at + bytes > std::prev(r)->first + std::prev(r)->second)
    refuse("map", "the address is outside every reserved range or unaligned");
  for (std::size_t off = 0; off < bytes; off += g) {
    if (!mappings_.emplace(at + off, page).second) refuse("map", "the address is already mapped");
    mapped_pages_[page]++;
  }
  counters_.maps++;
  counters_.mapped_bytes += bytes;
  counters_.simulated_ns += options_.map_ns;
}

void sim_backend::set_access(address_t at, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  for (std::size_t off = 0; off < bytes; off += facts_.granularity) {
    if (!mappings_.count(at + off)) refuse("set_access", "part of the range is not mapped");
  }
  counters_.set_accesses++;
  counters_.simulated_ns += options_.set_access_ns;
}

void sim_backend::unmap(address_t at, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  for (std::size_t off = 0; off < bytes; off += facts_.granularity) {
    auto it = mappings_.find(at + off);
    if (it == mappings_.end()) refuse("unmap", "the address is not mapped");
    if (--mapped_pages_[it->second] == 0) mapped_pages_.erase(it->second);
    mappings_.erase(it);
  }
  counters_.unmaps++;
  counters_.mapped_bytes -= bytes;
  counters_.simulated_ns += options_.unmap_ns;
}

page_id sim_backend::get_mapping(address_t at) const {
  std::lock_guard lock(mutex_);
  auto it = mappings_.find(at);
  return it == mappings_.end() ? 0 : it->second;
}

}  // namespace memkit
