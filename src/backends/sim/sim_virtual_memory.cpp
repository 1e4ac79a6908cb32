// The simulated device's virtual-memory primitive: address ranges, physical pages
// and mappings, checked and counted, never touched.
#include <algorithm>
#include <iterator>
#include <string>

#include "common/helpers.hpp"
#include "memkit/backends/sim.hpp"
#include "memkit/errors.hpp"

namespace memkit {

namespace {
[[noreturn]] void refuse(const char* function, const std::string& what) {
  throw invalid_argument(std::string("[memkit::sim_backend::") + function + "] " + what);
}
}  // namespace

bool sim_backend::is_mapped(const range& r, std::size_t offset, std::size_t bytes) {
  const std::size_t end = offset + bytes;
  auto it = r.mapped.upper_bound(offset);
  if (it == r.mapped.begin()) return bytes == 0;
  --it;  // the run starting at or below offset
  std::size_t covered = offset;
  for (; it != r.mapped.end() && it->first <= covered && covered < end; ++it) {
    covered = std::max(covered, it->first + it->second.bytes);
  }
  return covered >= end;
}

sim_backend::range* sim_backend::find_range(address_t at, std::size_t bytes) {
  for (range& r : ranges_) {
    if (at >= r.base && at + bytes <= r.base + r.bytes) return &r;
  }
  return nullptr;
}

address_t sim_backend::reserve_range(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const std::size_t g = facts_.granularity;
  if (bytes == 0 || bytes % g) refuse("reserve_range", "size is not a multiple of the granularity");
  // No addresses past the top of the address space; nothing is kept per granule,
  // so a huge reservation costs no host memory.
  // The next segment or range starts on the coarser of granule and alignment.
  const std::size_t unit = std::max<std::size_t>(g, facts_.alignment);
  if (bytes > ~address_t{0} - next_address_ - 2 * unit) return 0;
  const address_t base = next_address_;
  next_address_ += common::round_up(bytes + g, unit);
  ranges_.push_back({base, bytes, {}});
  counters_.ranges_reserved++;
  counters_.simulated_ns += options_.reserve_ns;
  return base;
}

void sim_backend::release_range(address_t base, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  range* r = find_range(base, bytes);
  if (!r || r->base != base || r->bytes != bytes) refuse("release_range", "no such range");
  if (!r->mapped.empty()) refuse("release_range", "pages still mapped");
  ranges_.erase(ranges_.begin() + (r - ranges_.data()));
}

page_id sim_backend::create_page(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes == 0 || bytes % facts_.granularity)
    refuse("create_page", "size is not a multiple of the granularity");
  if (counters_.reserved_bytes + counters_.page_bytes + bytes > facts_.capacity) {
    counters_.failed_allocs++;
    return 0;
  }
  const page_id page = pages_.size();
  pages_.push_back({bytes, 0});
  counters_.pages_created++;
  counters_.page_bytes += bytes;
  note_held_locked();
  counters_.simulated_ns +=
      options_.create_page_ns + options_.create_extra_page_ns * (bytes / facts_.granularity - 1);
  return page;
}

void sim_backend::release_page(page_id page, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (page == 0 || page >= pages_.size() || pages_[page].bytes != bytes)
    refuse("release_page", "no such page");
  if (pages_[page].mappings) refuse("release_page", "the page is still mapped");
  pages_[page].bytes = 0;
  counters_.pages_released++;
  counters_.page_bytes -= bytes;
  counters_.simulated_ns +=
      options_.release_page_ns + options_.release_extra_page_ns * (bytes / facts_.granularity - 1);
}

void sim_backend::map(address_t at, page_id page, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const std::size_t g = facts_.granularity;
  if (page == 0 || page >= pages_.size() || pages_[page].bytes != bytes)
    refuse("map", "no page of that size");
  range* r = find_range(at, bytes);
  if (!r || at % g) refuse("map", "the address is outside every reserved range or unaligned");
  const std::size_t offset = at - r->base;
  const auto above = r->mapped.lower_bound(offset);
  const bool overlaps_above = above != r->mapped.end() && above->first < offset + bytes;
  const bool overlaps_below = above != r->mapped.begin() &&
                              std::prev(above)->first + std::prev(above)->second.bytes > offset;
  if (overlaps_above || overlaps_below) refuse("map", "the address is already mapped");
  r->mapped.emplace_hint(above, offset, range::run{bytes, page});
  pages_[page].mappings += bytes / g;
  counters_.maps++;
  counters_.mapped_bytes += bytes;
  counters_.simulated_ns += options_.map_ns;
}

void sim_backend::set_access(address_t at, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const std::size_t g = facts_.granularity;
  range* r = find_range(at, bytes);
  if (!r) refuse("set_access", "the range is not reserved");
  const std::size_t offset = at - r->base;
  if (at % g || !is_mapped(*r, offset, bytes))
    refuse("set_access", "part of the range is not mapped");
  counters_.set_accesses++;
  // One call over many mappings costs about what one call each would: the driver sets
  // each physical handle's access (docs/BENCHMARKS.md, ../shared/device-costs.md).
  std::size_t handles = 0;
  for (auto it = std::prev(r->mapped.upper_bound(offset));
       it != r->mapped.end() && it->first < offset + bytes; ++it)
    ++handles;
  counters_.simulated_ns += options_.set_access_ns * handles;
}

void sim_backend::unmap(address_t at, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const std::size_t g = facts_.granularity;
  range* r = find_range(at, bytes);
  if (!r) refuse("unmap", "the range is not reserved");
  const std::size_t offset = at - r->base, end = offset + bytes;
  if (at % g || bytes % g || !is_mapped(*r, offset, bytes))
    refuse("unmap", "the address is not mapped");
  // Cut the runs at both ends, then drop those inside.
  auto it = std::prev(r->mapped.upper_bound(offset));
  if (it->first < offset) {
    const range::run whole = it->second;
    it->second.bytes = offset - it->first;
    it = r->mapped.emplace_hint(std::next(it), offset,
                                range::run{whole.bytes - it->second.bytes, whole.page});
  }
  while (it != r->mapped.end() && it->first < end) {
    range::run& run = it->second;
    if (it->first + run.bytes > end) {
      r->mapped.emplace_hint(std::next(it), end, range::run{it->first + run.bytes - end, run.page});
      run.bytes = end - it->first;
    }
    pages_[run.page].mappings -= run.bytes / g;
    it = r->mapped.erase(it);
  }
  counters_.unmaps++;
  counters_.mapped_bytes -= bytes;
  counters_.simulated_ns += options_.unmap_ns;
}

page_id sim_backend::get_mapping(address_t at) const {
  std::lock_guard lock(mutex_);
  for (const range& r : ranges_) {
    if (at < r.base || at >= r.base + r.bytes) continue;
    const auto it = r.mapped.upper_bound(at - r.base);
    if (it == r.mapped.begin()) return 0;
    const auto& [offset, run] = *std::prev(it);
    return at - r.base < offset + run.bytes ? run.page : 0;
  }
  return 0;
}

}  // namespace memkit
