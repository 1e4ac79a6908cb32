// Pages of a reserved address range: which are mapped, how many live blocks touch
// each, and the idle ones (mapped, untouched), in a bitmap, each stamped with when it
// became idle: the hot path touches no page but the block's own, and a block's inside
// pages as runs of arrays and words of bitmaps. What one page's free writes (its users,
// its bits, its stamp) lies in three places, not seven: a call finds the allocator's
// records cold, and each place is a cache line fetched.
// Numbers only: physical pages are ids the caller got from its backend.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

#include "memkit/types.hpp"

namespace memkit::placement {

class page_map {
 public:
  static constexpr page_index kNone = ~page_index{0};

  // Where a page's memory is. What the hot path changes on every block (its users,
  // and the last user's queue and serial once it is idle) lies in arrays of its own,
  // so that a block of many pages updates them in runs and words.
  struct page {
    page_id physical = 0;  // mapped physical page, 0 when unmapped
    // Unmapped here, but the device still maps a physical page here that now serves
    // another page (where it moved without an unmap): moving it back costs no call.
    page_id shadow = 0;              // that physical page; 0 when none (always, if mapped)
    page_index shadow_home = kNone;  // where it went (a hint: it may have moved since)
    bool busy = false;               // being mapped or unmapped with the lock released
  };
  static_assert(sizeof(page) <= 24, "a page record fits in 24 bytes");

  // Write physical and busy through set_physical / set_busy: they keep the bitmaps.
  page& at(page_index i) {
    if (i >= pages_.size()) [[unlikely]]
      grow(i);
    return pages_[i];
  }
  void set_physical(page_index i, page_id physical) {
    at(i).physical = physical;
    set_bit(&bit_words::mapped, i, physical != 0);
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
    return i < pages_.size() && (bits_[i / 64].usable >> (i % 64) & 1);
  }
  // The first page in [from, to] that starts a run of usable pages (usable, the page
  // below not); kNoPage if none.
  static constexpr std::uint64_t kNoPage = ~std::uint64_t{0};
  std::uint64_t find_run_start(std::uint64_t from, std::uint64_t to) const {
    if (pages_.empty() || from >= pages_.size()) return kNoPage;
    if (to >= pages_.size()) to = pages_.size() - 1;
    for (std::uint64_t w = from / 64; w <= to / 64; ++w) {
      const std::uint64_t bits = bits_[w].usable;
      const std::uint64_t below = bits << 1 | (w > 0 ? bits_[w - 1].usable >> 63 : 0);
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
      std::uint64_t holes = w < bits_.size() ? ~bits_[w].usable : ~std::uint64_t{0};
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
    bool all = true;
    for_each_word(first, last, [&](std::size_t w, std::uint64_t mask) {
      all = (bits_[w].usable & mask) == mask;
      return all;
    });
    return all;
  }
  // Usable pages in [first, last].
  std::uint64_t count_usable(std::uint64_t first, std::uint64_t last) const {
    if (first >= pages_.size()) return 0;
    if (last >= pages_.size()) last = pages_.size() - 1;
    std::uint64_t count = 0;
    for_each_word(first, last, [&](std::size_t w, std::uint64_t mask) {
      count += static_cast<std::uint64_t>(std::popcount(bits_[w].usable & mask));
      return true;
    });
    return count;
  }
  const page& get(page_index i) const { return pages_[i]; }
  page_index get_count() const { return static_cast<page_index>(pages_.size()); }
  std::uint32_t get_idle_count() const { return idle_count_; }
  // Live blocks touching page i.
  std::uint32_t get_users(page_index i) const { return users_[i]; }
  // Mapped (busy or not); false past the last page.
  bool is_mapped(page_index i) const {
    return i < pages_.size() && (bits_[i / 64].mapped >> (i % 64) & 1);
  }
  // Mapped with no users (its bit in the idle bitmap); false past the last page.
  bool is_idle(page_index i) const {
    return i < pages_.size() && (bits_[i / 64].idle >> (i % 64) & 1);
  }
  // While page i is idle: the queue of its last user and the serial of that free.
  queue_id get_queue(page_index i) const { return stamps_[i].queue; }
  serial_t get_free_serial(page_index i) const { return stamps_[i].free_serial; }
  void set_last_use(page_index i, queue_id queue, serial_t serial) {
    stamps_[i].queue = queue;
    stamps_[i].free_serial = serial;
  }

  void add_user(page_index i) {
    if (users_[i]++ == 0 && is_idle(i)) set_idle(i, false);
  }

  // A page left with no users stays mapped, idle since `serial`. Returns whether it
  // became idle.
  bool remove_user(page_index i, queue_id queue, serial_t serial) {
    if (--users_[i] > 0 || !pages_[i].physical) return false;
    set_last_use(i, queue, serial);
    set_idle(i, true);
    return true;
  }

  // The range forms below take the pages of one block, [first, last]: a page strictly
  // inside lies wholly within the block, so no other live block touches it (its
  // users go 0 -> 1 and back); only the end pages may be shared with neighbours.

  // add_user on every page of the block: the end pages one by one, the inside ones
  // as a run, the idle bitmap a word at a time (no page there is idle now).
  void add_users(page_index first, page_index last) {
    ++users_[first];
    if (last != first) ++users_[last];
    if (last - first > 1) std::fill(users_.begin() + first + 1, users_.begin() + last, 1u);
    std::uint32_t left_idle = 0;
    for_each_word(first, last, [&](std::size_t w, std::uint64_t mask) {
      left_idle += static_cast<std::uint32_t>(std::popcount(bits_[w].idle & mask));
      bits_[w].idle &= ~mask;
      return true;
    });
    idle_count_ -= left_idle;
  }
  // remove_user on every page of the block; whether any became idle. The inside pages
  // that are mapped become idle together, stamped with one event.
  bool remove_users(page_index first, page_index last, queue_id queue, serial_t serial) {
    const std::uint64_t since = ++idle_events_;  // ties: lowest page first
    const std::uint32_t idle_before = idle_count_;
    auto end_page = [&](page_index i) {
      if (--users_[i] > 0 || !is_mapped(i)) return;
      set_bit(&bit_words::idle, i, true);
      stamps_[i] = {serial, since, queue};
      ++idle_count_;
    };
    end_page(first);
    if (last != first) end_page(last);
    if (last - first > 1) {
      const page_index inside = first + 1;  // the inside pages: [inside, last)
      std::fill(users_.begin() + inside, users_.begin() + last, 0u);
      std::uint32_t idled = 0;
      for_each_word(inside, last - 1, [&](std::size_t w, std::uint64_t mask) {
        bits_[w].idle |= bits_[w].mapped & mask;
        idled += static_cast<std::uint32_t>(std::popcount(bits_[w].mapped & mask));
        return true;
      });
      idle_count_ += idled;
      if (idled == last - inside) {  // usually every page is mapped: one run
        std::fill(stamps_.begin() + inside, stamps_.begin() + last,
                  idle_stamp{serial, since, queue});
      } else {
        for (page_index i = inside; i < last; ++i)
          if (is_mapped(i)) stamps_[i] = {serial, since, queue};
      }
    }
    return idle_count_ != idle_before;
  }

  // Calls visit(i) for each idle page, lowest first (a scan of the idle bitmap).
  template <class Visit>
  void visit_idle(Visit&& visit) const {
    for (std::size_t w = 0; w < bits_.size(); ++w) {
      for (std::uint64_t bits = bits_[w].idle; bits != 0; bits &= bits - 1)
        visit(static_cast<page_index>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits))));
    }
  }
  // The idle pages, least recently used first (in the order they became idle, the
  // pages of one event lowest first). A walk of every idle page, for the slow paths
  // that give pages back.
  std::vector<page_index> calculate_idle_by_age() const {
    std::vector<std::pair<std::uint64_t, page_index>> aged;
    aged.reserve(idle_count_);
    visit_idle([&](page_index i) { aged.emplace_back(stamps_[i].since, i); });
    std::sort(aged.begin(), aged.end());
    std::vector<page_index> order;
    order.reserve(aged.size());
    for (const auto& [serial, i] : aged) order.push_back(i);
    return order;
  }

  // The highest idle page in [from, to], or kNone (a scan of the idle bitmap downwards).
  page_index find_idle_below(page_index to, page_index from = 0) const {
    if (pages_.empty() || to < from) return kNone;
    if (to >= pages_.size()) to = static_cast<page_index>(pages_.size() - 1);
    for (std::uint64_t w = to / 64 + 1; w-- > from / 64;) {
      std::uint64_t bits = bits_[w].idle;
      if (w == to / 64 && to % 64 != 63) bits &= (std::uint64_t{1} << (to % 64 + 1)) - 1;
      if (w == from / 64) bits &= ~std::uint64_t{0} << (from % 64);
      if (bits)
        return static_cast<page_index>(w * 64 + 63 -
                                       static_cast<std::uint64_t>(std::countl_zero(bits)));
    }
    return kNone;
  }

  // Marks page i idle or not (it must not be so already).
  void set_idle(page_index i, bool idle) {
    set_bit(&bit_words::idle, i, idle);
    if (idle) {
      stamps_[i].since = ++idle_events_;
      ++idle_count_;
    } else {
      --idle_count_;
    }
  }

 private:
  [[gnu::noinline]] void grow(page_index i) {
    pages_.resize(i + 1);
    users_.resize(i + 1);
    stamps_.resize(i + 1);
    bits_.resize(i / 64 + 1);
  }

  // visit(word, mask) for each word of the bitmaps that [first, last] covers, the mask
  // selecting its pages there, until visit returns false.
  // The end words' masks are computed once, outside the loop: most blocks lie in one.
  template <class Visit>
  static void for_each_word(std::uint64_t first, std::uint64_t last, Visit&& visit) {
    const std::size_t first_word = first / 64;
    const std::size_t last_word = last / 64;
    const std::uint64_t low = ~std::uint64_t{0} << (first % 64);       // pages >= first
    const std::uint64_t high = ~std::uint64_t{0} >> (63 - last % 64);  // pages <= last
    if (first_word == last_word) {
      visit(first_word, low & high);
      return;
    }
    if (!visit(first_word, low)) return;
    for (std::size_t w = first_word + 1; w < last_word; ++w) {
      if (!visit(w, ~std::uint64_t{0})) return;
    }
    visit(last_word, high);
  }

  // The three bitmaps, a word of each together: a page's bits are one cache line.
  struct bit_words {
    std::uint64_t usable = 0;  // bit i: page i is mapped and not busy
    std::uint64_t mapped = 0;  // bit i: page i is mapped (busy or not)
    std::uint64_t idle = 0;    // bit i: page i is idle
  };
  // What an idle page's last free wrote, together.
  struct idle_stamp {
    serial_t free_serial = 0;  // when its last user was freed
    std::uint64_t since = 0;   // when it became idle (idle_events_ then)
    queue_id queue = 0;        // queue of its last user
  };
  void set_bit(std::uint64_t bit_words::*bitmap, page_index i, bool on) {
    const std::uint64_t bit = std::uint64_t{1} << (i % 64);
    if (on)
      bits_[i / 64].*bitmap |= bit;
    else
      bits_[i / 64].*bitmap &= ~bit;
  }
  void update_usable(page_index i) {
    set_bit(&bit_words::usable, i, pages_[i].physical != 0 && !pages_[i].busy);
  }

  std::vector<page> pages_;
  std::vector<std::uint32_t> users_;  // live blocks touching each page
  std::vector<idle_stamp> stamps_;    // idle pages: their last free
  std::vector<bit_words> bits_;       // word w: pages [64 w, 64 w + 64)
  std::size_t shadow_count_ = 0;      // pages with a shadow
  std::uint32_t idle_count_ = 0;      // idle pages (bits set)
  std::uint64_t idle_events_ = 0;     // calls that left pages idle, ever
};

}  // namespace memkit::placement
