#include "pools/segment_pool.hpp"

#include <algorithm>
#include <string>

#include "memkit/errors.hpp"

namespace memkit::pools {

segment_pool::~segment_pool() {
  for (segment* s : segments_) delete s;  // the blocks' records go with the placer
}

block* segment_pool::carve(block* b, std::size_t size, queue_id queue) {
  unfile(b);
  // The top of a range stands apart from a block pending on a queue just below it
  // (so that other queues still find it free); that queue itself may use both at
  // once, as if they had merged, and the rest of the top stays as it was.
  auto* lower = static_cast<block*>(b->prev_range);
  if (merge_by_queue_ && !b->next_range && lower && !lower->live && lower->indexed &&
      lower->queue == queue && size > lower->size) {
    const serial_t top_serial = b->free_serial;
    unfile(lower);
    block* taken = carve_out(merge(lower, b), size, queue, false);
    if (auto* rest = static_cast<block*>(taken->next_range)) rest->free_serial = top_serial;
    return taken;
  }
  return carve_out(b, size, queue, place_high(b, size));
}

block* segment_pool::carve_out(block* b, std::size_t size, queue_id queue, bool high) {
  if (!may_leave_unsplit(b->size, size, small_)) {
    if (high) {
      block* rest = split_off(b, b->size - size);  // b keeps the free low part
      if (b->is_listed()) list_unmerged(rest);
      std::swap(b, rest);
      file(rest);
    } else {
      block* rest = split_off(b, size);
      file(rest);
      auto* upper = static_cast<block*>(rest->next_range);
      if (upper && upper->indexed) list_unmerged(rest);  // it stays apart from upper
    }
  }
  b->live = true;
  b->queue = queue;
  segment* s = b->owner;
  if (s->live_blocks++ == 0) set_idle(s, false);
  return b;
}

block* segment_pool::take_at(const block* free_block, std::uint64_t start, std::size_t size,
                             queue_id queue, queue_id* previous_queue) {
  auto* b = const_cast<block*>(free_block);
  if (previous_queue) *previous_queue = b->queue;
  unfile(b);
  if (start - b->offset >= kQuantum) {
    // The part below `start` stays free where it is.
    block* rest = split_off(b, start - b->offset);
    file(b);
    if (b->is_listed()) list_unmerged(rest);
    b = rest;
  }
  return carve_out(b, size, queue, false);
}

std::size_t segment_pool::calculate_largest_free() const { return placer_.calculate_largest(); }

bool segment_pool::place_high(const block* b, std::size_t size) const {
  // With pages, a block placed against a live neighbour shares that neighbour's
  // partly used page: take the high end when only the high neighbour offers one.
  if (!page_size_) return false;
  const auto* lower = static_cast<const block*>(b->prev_range);
  const auto* upper = static_cast<const block*>(b->next_range);
  const std::uint64_t top = b->offset + b->size;
  const std::uint64_t in_page = page_size_ - 1;  // a power of two: a mask, not a division
  const bool low_shares = lower && lower->live && (b->offset & in_page);
  const bool high_shares = upper && upper->live && (top & in_page);
  return high_shares && !low_shares && size < b->size;
}

block* segment_pool::add_free(address_t base, std::size_t segment_size, bool virtual_range) {
  auto* s = new segment;
  s->pool = this;
  s->base = base;
  s->size = segment_size;
  s->small = small_;
  s->virtual_range = virtual_range;
  block* b = placer_.make_container(segment_size);
  b->owner = s;
  s->first = b;
  segments_.push_back(s);
  file(b);
  set_idle(s, true);
  return b;
}

void segment_pool::add_free_segment(address_t base, std::size_t segment_size) {
  add_free(base, segment_size, true);
}

block* segment_pool::add_segment(address_t base, std::size_t segment_size, std::size_t size,
                                 queue_id queue) {
  return carve(add_free(base, segment_size, false), size, queue);
}

bool segment_pool::can_merge(const block* lower, const block* upper) const {
  // Both safe everywhere: always. A block pending on a queue merges with one pending
  // on the same queue, and (when merging by queue) with a safe neighbour that queue
  // used last: that queue may use all of it at once, and the layout then does not
  // depend on when fences complete. The untouched top of a range stays apart from
  // pending blocks so that every queue can still use it.
  if (lower->deferred || upper->deferred) return false;
  const bool lower_safe = is_safe(lower);
  const bool upper_safe = is_safe(upper);
  if (lower_safe && upper_safe) return true;
  if (lower->queue != upper->queue) return false;
  if (lower_safe != upper_safe)
    return merge_by_queue_ && (upper->next_range != nullptr || !keep_top_apart_);
  return true;
}

void segment_pool::join_state(block* lower, block* upper) {
  // Both safe: safe for good. Otherwise wait for the later free (one queue).
  if (is_safe(lower) && is_safe(upper))
    lower->free_serial = 0;
  else if (upper->free_serial > lower->free_serial)
    lower->free_serial = upper->free_serial;
  if (upper->is_listed()) {
    list_unmerged(lower);  // upper's other neighbour still stands apart
    unmerged_[upper->unmerged_slot] = nullptr;
  }
}

block* segment_pool::merge(block* lower, block* upper) {
  join_state(lower, upper);
  return placer_.merge(lower, upper);
}

void segment_pool::list_unmerged(block* b) {
  if (b->is_listed()) return;
  b->unmerged_slot = static_cast<std::uint32_t>(unmerged_.size());
  unmerged_.push_back(b);
}

void segment_pool::discard(block* b) {
  if (b->is_listed()) unmerged_[b->unmerged_slot] = nullptr;
  placer_.discard(b);
}

void segment_pool::defer(block* b) {
  b->live = false;
  b->requested = 0;
  b->deferred = true;
  segment* s = b->owner;
  if (--s->live_blocks == 0) set_idle(s, true);
}

void segment_pool::give_back(block* b, serial_t free_serial) {
  b->live = false;
  b->requested = 0;
  b->free_serial = free_serial;
  // Merge each way for as long as the state allows: a neighbour absorbed here may
  // have stood apart from its own other neighbour, which can join now.
  bool apart = false;
  b = placer_.release(b, [&](block* lower, block* upper) {
    if (!can_merge(lower, upper)) {
      apart = true;
      return false;
    }
    join_state(lower, upper);
    return true;
  });
  file(b);
  if (apart) list_unmerged(b);
  segment* s = b->owner;
  if (--s->live_blocks == 0) set_idle(s, true);
}

void segment_pool::release_deferred(block* b) {
  b->deferred = false;
  b->live = true;  // give_back expects a live block; the segment count was kept
  b->owner->live_blocks++;
  give_back(b, 0);
}

void segment_pool::merge_unmerged() {
  // Re-file each listed block once: it merges with what its state now allows, or
  // is listed again at the end. Blocks merged away were nulled by discard().
  const std::size_t listed = unmerged_.size();
  for (std::size_t k = 0; k < listed; ++k) {
    block* b = unmerged_[k];
    if (!b) continue;
    unmerged_[k] = nullptr;
    b->unmerged_slot = block::kNotListed;
    if (b->live || !b->indexed) continue;
    unfile(b);
    b->live = true;
    b->owner->live_blocks++;
    give_back(b, b->free_serial);
  }
  std::size_t kept = 0;
  for (std::size_t k = listed; k < unmerged_.size(); ++k) {
    if (block* b = unmerged_[k]) {
      b->unmerged_slot = static_cast<std::uint32_t>(kept);
      unmerged_[kept++] = b;
    }
  }
  unmerged_.resize(kept);
}

void segment_pool::set_idle(segment* s, bool idle) {
  if (idle == s->idle) return;
  s->idle = idle;
  if (idle) {
    s->prev_idle = nullptr;
    s->next_idle = idle_head_;
    if (idle_head_) idle_head_->prev_idle = s;
    idle_head_ = s;
    if (!idle_tail_) idle_tail_ = s;
  } else {
    if (s->prev_idle)
      s->prev_idle->next_idle = s->next_idle;
    else
      idle_head_ = s->next_idle;
    if (s->next_idle)
      s->next_idle->prev_idle = s->prev_idle;
    else
      idle_tail_ = s->prev_idle;
    s->prev_idle = s->next_idle = nullptr;
  }
}

segment* segment_pool::get_releasable() const {
  for (segment* s = idle_tail_; s; s = s->prev_idle) {
    if (is_releasable(s)) return s;
  }
  return nullptr;
}

serial_t segment_pool::calculate_wait_serial(queue_id queue, std::size_t count) const {
  std::vector<serial_t> waiting;
  for (const segment* s = idle_tail_; s; s = s->prev_idle) {
    if (is_whole_free(s) && !is_safe(s->first) && s->first->queue == queue)
      waiting.push_back(s->first->free_serial);
  }
  return serial_freeing(waiting, count);
}

std::size_t segment_pool::calculate_releasable() const {
  std::size_t bytes = 0;
  for (const segment* s : segments_) {
    if (is_releasable(s)) bytes += s->size;
  }
  return bytes;
}

void segment_pool::remove_segment(segment* s) {
  set_idle(s, false);
  unfile(s->first);
  discard(s->first);
  segments_.erase(std::find(segments_.begin(), segments_.end(), s));
  delete s;
}

void segment_pool::validate(std::size_t* live_bytes, std::size_t* free_bytes,
                            std::size_t* live_blocks, std::size_t* requested_bytes) const {
  auto fail = [](const std::string& what) {
    throw invariant_violation("[memkit::validate] " + what);
  };
  std::uint64_t indexed = 0;
  for (const segment* s : segments_) {
    std::size_t offset = 0;
    std::size_t live = 0;
    const block* prev = nullptr;
    for (const block* b = s->first; b; b = static_cast<const block*>(b->next_range)) {
      if (b->owner != s) fail("a block's owner is not its segment");
      if (b->offset != offset) fail("blocks do not tile their segment");
      if (b->prev_range != prev) fail("a block's lower link is wrong");
      if (b->size == 0) fail("an empty block");
      offset += b->size;
      if (b->live) {
        ++live;
        *live_bytes += b->size;
        *requested_bytes += b->requested;
        if (b->indexed) fail("a live block is in the free index");
        if (b->requested > b->size) fail("a live block asks for more than it holds");
      } else {
        *free_bytes += b->size;
        if (b->deferred == b->indexed) fail("a free block is neither indexed nor deferred");
        if (b->indexed) {
          ++indexed;
          if (b->bin != placement::free_index::bin_of(b->size))
            fail("a free block is in the wrong bin");
        }
        if (prev && !prev->live && prev->indexed && b->indexed && can_merge(prev, b) &&
            !prev->is_listed() && !b->is_listed())
          fail("two mergeable free neighbours were left apart");
      }
      prev = b;
    }
    if (offset != s->size) fail("blocks do not cover their segment");
    if (live != s->live_blocks) fail("a segment's live-block count is wrong");
    if (s->idle != (live == 0)) fail("a segment's idle mark is wrong");
    if (s->pool != this) fail("a segment names another pool as its own");
    *live_blocks += live;
  }
  if (indexed != placer_.get_filed_count())
    fail("the free index holds blocks outside the segments");
  placer_.for_each_by_offset([&](std::uint64_t offset, const block* b) {
    if (b->offset != offset || !b->indexed) fail("the address index names a block wrongly");
  });
}

}  // namespace memkit::pools
