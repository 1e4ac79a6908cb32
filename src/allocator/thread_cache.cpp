#include "allocator/thread_cache.hpp"

namespace memkit {

namespace {
std::size_t slot_of(address_t address, std::size_t mask) {
  return static_cast<std::size_t>((address >> 9) * 0x9E3779B97F4A7C15ull >> 24) & mask;
}
}  // namespace

void thread_cache::remember(address_t address, pools::block* b, std::uint64_t stamp) {
  if (2 * (held_count_ + 1) > held_.size()) {
    // Entries of blocks freed on other threads linger: start afresh rather than grow.
    std::fill(held_.begin(), held_.end(), held{});
    held_count_ = 0;
  }
  const std::size_t mask = held_.size() - 1;
  std::size_t i = slot_of(address, mask);
  while (held_[i].address != 0 && held_[i].address != address) i = (i + 1) & mask;
  if (held_[i].address == 0) ++held_count_;
  held_[i] = {address, b, stamp};
}

pools::block* thread_cache::recall(address_t address) {
  if (held_count_ == 0) return nullptr;
  const std::size_t mask = held_.size() - 1;
  std::size_t hole = slot_of(address, mask);
  while (held_[hole].address != address) {
    if (held_[hole].address == 0) return nullptr;
    hole = (hole + 1) & mask;
  }
  pools::block* b = held_[hole].b;
  const bool still_ours = b->stamp.load(std::memory_order_acquire) == held_[hole].stamp;
  // Remove the entry, shifting back later entries of the same probe run.
  for (std::size_t i = (hole + 1) & mask; held_[i].address != 0; i = (i + 1) & mask) {
    const std::size_t home = slot_of(held_[i].address, mask);
    if (((i - home) & mask) >= ((i - hole) & mask)) {
      held_[hole] = held_[i];
      hole = i;
    }
  }
  held_[hole] = {};
  --held_count_;
  return still_ours ? b : nullptr;
}

}  // namespace memkit
