// Pages of a reserved address range: which are mapped, how many live blocks touch
// each, and the idle ones (mapped, untouched) in least-recently-used order.
// Numbers only: physical pages are ids the caller got from its backend.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include "memkit/types.hpp"

namespace memkit::placement {

class page_map {
 public:
  static constexpr page_index kNone = ~page_index{0};

  struct page {
    page_id physical = 0;          // mapped physical page, 0 when unmapped
    serial_t free_serial = 0;      // idle: when its last user was freed
    std::uint32_t users = 0;       // live blocks touching the page
    queue_id queue = 0;            // idle: queue of its last user
    page_index prev_idle = kNone;  // idle list links, most recent first
    page_index next_idle = kNone;
    bool busy = false;  // being mapped or unmapped with the lock released
    bool idle = false;  // on the idle list
    // Unmapped here, but the device still maps a physical page here that now serves
    // another page (where it moved without an unmap): moving it back costs no call.
    page_id shadow = 0;              // that physical page; 0 when none (always, if mapped)
    page_index shadow_home = kNone;  // where it went (a hint: it may have moved since)
  };

  // Write physical and busy through set_physical / set_busy: they keep the bitmap.
  page& at(page_index i) {
    if (i >= pages_.size()) [[unlikely]]
      grow(i);
    return pages_[i];
  }
  void set_physical(page_index i, page_id physical) {
    at(i).physical = physical;
    update_usable(i);
  }
  void set_busy(page_index i, bool busy) {
    at(i).busy = busy;
    update_usable(i);
  }
  // Write shadow through here: it keeps their count.
  void set_shadow(page_index i, page_id shadow, page_index home) {
    page& p = at(i);
    shadow_count_ = shadow_count_ - (p.shadow != 0) + (shadow != 0);
    p.shadow = shadow;
    p.shadow_home = home;
  }
  std::size_t get_shadow_count() const { return shadow_count_; }
  // Mapped and not being mapped; false past the last page.
  bool is_usable(std::uint64_t i) const {
    return i < pages_.size() && (usable_[i / 64] >> (i % 64) & 1);
  }
  // The first page in [from, to] that starts a run of usable pages (usable, the page
  // below not); kNoPage if none.
  static constexpr std::uint64_t kNoPage = ~std::uint64_t{0};
  std::uint64_t find_run_start(std::uint64_t from, std::uint64_t to) const {
    if (pages_.empty() || from >= pages_.size()) return kNoPage;
    if (to >= pages_.size()) to = pages_.size() - 1;
    for (std::uint64_t w = from / 64; w <= to / 64; ++w) {
      const std::uint64_t bits = usable_[w];
      const std::uint64_t below = bits << 1 | (w > 0 ? usable_[w - 1] >> 63 : 0);
      std::uint64_t starts = bits & ~below;
      if (w == from / 64) starts &= ~std::uint64_t{0} << (from % 64);
      if (starts) {
        const std::uint64_t first = w * 64 + static_cast<std::uint64_t>(std::countr_zero(starts));
        return first <= to ? first : kNoPage;
      }
    }
    return kNoPage;
  }
  // The first page in [from, to] that is not usable; to + 1 if every one is (pages
  // past the last count as unusable).
  std::uint64_t find_unusable(std::uint64_t from, std::uint64_t to) const {
    if (from >= pages_.size()) return from;
    for (std::uint64_t w = from / 64; w <= to / 64; ++w) {
      std::uint64_t holes = w < usable_.size() ? ~usable_[w] : ~std::uint64_t{0};
      if (w == from / 64) holes &= ~std::uint64_t{0} << (from % 64);
      if (holes) {
        const std::uint64_t first = w * 64 + static_cast<std::uint64_t>(std::countr_zero(holes));
        return first <= to ? first : to + 1;
      }
    }
    return to + 1;
  }
  // Whether every page in [first, last] is usable (a mask test a word, no count).
  bool are_all_usable(std::uint64_t first, std::uint64_t last) const {
    if (last >= pages_.size()) return false;
    for (std::uint64_t w = first / 64; w <= last / 64; ++w) {
      std::uint64_t mask = ~std::uint64_t{0};
      if (w == first / 64) mask &= ~std::uint64_t{0} << (first % 64);
      if (w == last / 64 && last % 64 != 63) mask &= (std::uint64_t{1} << (last % 64 + 1)) - 1;
      if ((usable_[w] & mask) != mask) return false;
    }
    return true;
  }
  // Usable pages in [first, last].
  std::uint64_t count_usable(std::uint64_t first, std::uint64_t last) const {
    if (first >= pages_.size()) return 0;
    if (last >= pages_.size()) last = pages_.size() - 1;
    std::uint64_t count = 0;
    for (std::uint64_t w = first / 64; w <= last / 64; ++w) {
      std::uint64_t bits = usable_[w];
      if (w == first / 64) bits &= ~std::uint64_t{0} << (first % 64);
      if (w == last / 64 && last % 64 != 63) bits &= (std::uint64_t{1} << (last % 64 + 1)) - 1;
      count += static_cast<std::uint64_t>(std::popcount(bits));
    }
    return count;
  }
  const page& get(page_index i) const { return pages_[i]; }
  page_index get_count() const { return static_cast<page_index>(pages_.size()); }
  std::uint32_t get_idle_count() const { return idle_count_; }
  page_index get_idle_tail() const { return idle_tail_; }

  void add_user(page_index i) {
    page& p = pages_[i];
    if (p.users++ == 0 && p.idle) unlink_idle(i);
  }

  // A page left with no users stays mapped, as the most recently idle page.
  // Returns whether it became idle.
  bool remove_user(page_index i, queue_id queue, serial_t serial) {
    page& p = pages_[i];
    if (--p.users > 0 || !p.physical) return false;
    p.queue = queue;
    p.free_serial = serial;
    link_idle(i);
    return true;
  }

  // The highest idle page in [from, to], or kNone (a scan of the idle bitmap downwards).
  page_index find_idle_below(page_index to, page_index from = 0) const {
    if (pages_.empty() || to < from) return kNone;
    if (to >= pages_.size()) to = static_cast<page_index>(pages_.size() - 1);
    for (std::uint64_t w = to / 64 + 1; w-- > from / 64;) {
      std::uint64_t bits = idle_bits_[w];
      if (w == to / 64 && to % 64 != 63) bits &= (std::uint64_t{1} << (to % 64 + 1)) - 1;
      if (w == from / 64) bits &= ~std::uint64_t{0} << (from % 64);
      if (bits)
        return static_cast<page_index>(w * 64 + 63 -
                                       static_cast<std::uint64_t>(std::countl_zero(bits)));
    }
    return kNone;
  }

  void unlink_idle(page_index i) {
    page& p = pages_[i];
    idle_bits_[i / 64] &= ~(std::uint64_t{1} << (i % 64));
    if (p.prev_idle != kNone)
      pages_[p.prev_idle].next_idle = p.next_idle;
    else
      idle_head_ = p.next_idle;
    if (p.next_idle != kNone)
      pages_[p.next_idle].prev_idle = p.prev_idle;
    else
      idle_tail_ = p.prev_idle;
    p.prev_idle = p.next_idle = kNone;
    p.idle = false;
    --idle_count_;
  }

  void link_idle(page_index i) {
    page& p = pages_[i];
    idle_bits_[i / 64] |= std::uint64_t{1} << (i % 64);
    p.idle = true;
    p.prev_idle = kNone;
    p.next_idle = idle_head_;
    if (idle_head_ != kNone) pages_[idle_head_].prev_idle = i;
    idle_head_ = i;
    if (idle_tail_ == kNone) idle_tail_ = i;
    ++idle_count_;
  }

 private:
  [[gnu::noinline]] void grow(page_index i) {
    pages_.resize(i + 1);
    usable_.resize(i / 64 + 1);
    idle_bits_.resize(i / 64 + 1);
  }

  void update_usable(page_index i) {
    const std::uint64_t bit = std::uint64_t{1} << (i % 64);
    if (pages_[i].physical != 0 && !pages_[i].busy)
      usable_[i / 64] |= bit;
    else
      usable_[i / 64] &= ~bit;
  }

  std::vector<page> pages_;
  std::vector<std::uint64_t> usable_;     // bit i: page i is mapped and not busy
  std::vector<std::uint64_t> idle_bits_;  // bit i: page i is on the idle list
  std::size_t shadow_count_ = 0;          // pages with a shadow
  page_index idle_head_ = kNone;          // most recently idle
  page_index idle_tail_ = kNone;          // least recently idle
  std::uint32_t idle_count_ = 0;
};

}  // namespace memkit::placement
