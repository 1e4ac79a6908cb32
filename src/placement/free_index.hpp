// A segregated-fit index of free ranges, by size: numbers only, no backend.
//
// Sizes map to bins: 32 bins per power of two, so every range in one bin is within
// 1/32 of the others. A two-level bitmap finds the next non-empty bin in O(1).
// find() is best fit within the request's own bin and first fit (of ranges the
// caller accepts) in the bins above it, where every range is already big enough.
#pragma once

#include <bit>
#include <cstdint>

namespace memkit::placement {

// Embedded in the caller's range records (pools derive their blocks from it).
struct free_node {
  std::uint64_t size = 0;          // bytes in the range
  free_node* prev_free = nullptr;  // neighbours in the same bin
  free_node* next_free = nullptr;
  std::uint32_t bin = 0;  // bin the node is filed under
  bool indexed = false;   // the node is in the index
};

class free_index {
 public:
  static constexpr int kSubBits = 5;
  static constexpr std::uint32_t kSub = 1u << kSubBits;
  static constexpr int kLevels = 64 - kSubBits + 1;

  static constexpr std::uint32_t bin_of(std::uint64_t size) {
    if (size < kSub) return static_cast<std::uint32_t>(size);
    const int msb = 63 - std::countl_zero(size);
    const auto level = static_cast<std::uint32_t>(msb - kSubBits + 1);
    const auto sub = static_cast<std::uint32_t>(size >> (msb - kSubBits)) - kSub;
    return level * kSub + sub;
  }

  void insert(free_node* node) {
    const std::uint32_t bin = bin_of(node->size);
    node->bin = bin;
    node->indexed = true;
    node->prev_free = nullptr;
    node->next_free = heads_[bin];
    if (heads_[bin]) heads_[bin]->prev_free = node;
    heads_[bin] = node;
    level_bits_ |= std::uint64_t{1} << (bin / kSub);
    sub_bits_[bin / kSub] |= 1u << (bin % kSub);
    ++count_;
  }

  void remove(free_node* node) {
    const std::uint32_t bin = node->bin;
    if (node->prev_free) {
      node->prev_free->next_free = node->next_free;
    } else {
      heads_[bin] = node->next_free;
      if (!heads_[bin]) {
        sub_bits_[bin / kSub] &= ~(1u << (bin % kSub));
        if (!sub_bits_[bin / kSub]) level_bits_ &= ~(std::uint64_t{1} << (bin / kSub));
      }
    }
    if (node->next_free) node->next_free->prev_free = node->prev_free;
    node->prev_free = node->next_free = nullptr;
    node->indexed = false;
    --count_;
  }

  // The best range of at least `size` bytes that accept(node) takes, or nullptr.
  template <class Accept>
  free_node* find(std::uint64_t size, Accept&& accept) const {
    const std::uint32_t own = bin_of(size);
    free_node* best = nullptr;
    for (free_node* n = heads_[own]; n; n = n->next_free) {
      if (n->size >= size && (!best || n->size < best->size) && accept(n)) {
        best = n;
        if (n->size == size) break;
      }
    }
    if (best) return best;
    for (std::uint32_t bin = next_bin(own + 1); bin != kNone; bin = next_bin(bin + 1)) {
      for (free_node* n = heads_[bin]; n; n = n->next_free) {
        if (accept(n)) return n;
      }
    }
    return nullptr;
  }

  // Calls visit(node) on ranges of at least `size` bytes, the request's own bin
  // first, then the bins above, until it returns true.
  template <class Visit>
  void visit_fits(std::uint64_t size, Visit&& visit) const {
    for (std::uint32_t bin = next_bin(bin_of(size)); bin != kNone; bin = next_bin(bin + 1)) {
      for (free_node* n = heads_[bin]; n; n = n->next_free) {
        if (n->size >= size && visit(n)) return;
      }
    }
  }

  // The largest indexed range's size (0 when empty).
  std::uint64_t calculate_largest() const {
    if (!level_bits_) return 0;
    const int level = 63 - std::countl_zero(level_bits_);
    const int sub = 31 - std::countl_zero(sub_bits_[level]);
    std::uint64_t largest = 0;
    for (free_node* n = heads_[level * kSub + static_cast<std::uint32_t>(sub)]; n;
         n = n->next_free) {
      if (n->size > largest) largest = n->size;
    }
    return largest;
  }

  std::uint64_t get_count() const { return count_; }

  // Calls f(node) for every indexed node.
  template <class F>
  void for_each(F&& f) const {
    for (std::uint32_t bin = next_bin(0); bin != kNone; bin = next_bin(bin + 1)) {
      for (free_node* n = heads_[bin]; n; n = n->next_free) f(n);
    }
  }

 private:
  static constexpr std::uint32_t kNone = ~0u;

  // The first non-empty bin at or above `bin`.
  std::uint32_t next_bin(std::uint32_t bin) const {
    std::uint32_t level = bin / kSub;
    if (level >= kLevels) return kNone;
    const std::uint32_t subs = sub_bits_[level] & (~0u << (bin % kSub));
    if (subs) return level * kSub + static_cast<std::uint32_t>(std::countr_zero(subs));
    if (level + 1 >= 64) return kNone;
    const std::uint64_t levels = level_bits_ & (~std::uint64_t{0} << (level + 1));
    if (!levels) return kNone;
    level = static_cast<std::uint32_t>(std::countr_zero(levels));
    return level * kSub + static_cast<std::uint32_t>(std::countr_zero(sub_bits_[level]));
  }

  std::uint64_t level_bits_ = 0;           // bit l: some bin of level l is non-empty
  std::uint32_t sub_bits_[kLevels] = {};   // bit s of level l: bin l*32+s non-empty
  free_node* heads_[kLevels * kSub] = {};  // one list per bin, most recent first
  std::uint64_t count_ = 0;                // nodes indexed
};

}  // namespace memkit::placement
