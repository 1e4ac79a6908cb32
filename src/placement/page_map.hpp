// Pages of a reserved address range: which are mapped, how many live blocks touch
// each, and the idle ones (mapped, untouched) in least-recently-used order.
// Numbers only: physical pages are ids the caller got from its backend.
#pragma once

#include <cstdint>
#include <vector>

namespace memkit::placement {

class page_map {
 public:
  static constexpr std::uint32_t kNone = ~0u;

  struct page {
    std::uint64_t physical = 0;       // mapped physical page, 0 when unmapped
    std::uint64_t free_serial = 0;    // idle: when its last user was freed
    std::uint32_t users = 0;          // live blocks touching the page
    std::uint32_t queue = 0;          // idle: queue of its last user
    std::uint32_t prev_idle = kNone;  // idle list links, most recent first
    std::uint32_t next_idle = kNone;
    bool busy = false;  // being mapped with the lock released
    bool idle = false;  // on the idle list
  };

  page& at(std::uint32_t i) {
    if (i >= pages_.size()) pages_.resize(i + 1);
    return pages_[i];
  }
  const page& get(std::uint32_t i) const { return pages_[i]; }
  std::uint32_t get_count() const { return static_cast<std::uint32_t>(pages_.size()); }
  std::uint32_t get_idle_count() const { return idle_count_; }
  std::uint32_t get_idle_tail() const { return idle_tail_; }

  void add_user(std::uint32_t i) {
    page& p = at(i);
    if (p.users++ == 0 && p.idle) unlink_idle(i);
  }

  // A page left with no users stays mapped, as the most recently idle page.
  void remove_user(std::uint32_t i, std::uint32_t queue, std::uint64_t serial) {
    page& p = pages_[i];
    if (--p.users == 0 && p.physical) {
      p.queue = queue;
      p.free_serial = serial;
      link_idle(i);
    }
  }

  void unlink_idle(std::uint32_t i) {
    page& p = pages_[i];
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

  void link_idle(std::uint32_t i) {
    page& p = pages_[i];
    p.idle = true;
    p.prev_idle = kNone;
    p.next_idle = idle_head_;
    if (idle_head_ != kNone) pages_[idle_head_].prev_idle = i;
    idle_head_ = i;
    if (idle_tail_ == kNone) idle_tail_ = i;
    ++idle_count_;
  }

 private:
  std::vector<page> pages_;
  std::uint32_t idle_head_ = kNone;  // most recently idle
  std::uint32_t idle_tail_ = kNone;  // least recently idle
  std::uint32_t idle_count_ = 0;
};

}  // namespace memkit::placement
