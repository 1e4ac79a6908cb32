// The one placer of sub-ranges, offsets only (like Vulkan Memory Allocator's virtual
// block): ranges that tile containers in address order (a segment pool's segments,
// the arrays layer's buffers), split and merged in place, the free ones filed by
// size in the segregated-fit index (free_index.hpp), or by offset for a pool that
// places at exact offsets, and their records recycled (node_pool.hpp).
//
// It decides nothing. Which free range a request takes is the caller's accept test
// (a queue's fences for the segment pools, the WebGPU rule's excluded buffers for
// the arrays layer), where it is cut is the caller's split, which free neighbours
// merge is the caller's rule, and what a range belongs to and when it may be
// reused are fields of Node.
//
// Node derives from range_node and has reset(), which makes a fresh record, and
// inherit(from), which gives a range split off `from` what it keeps of it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "placement/free_index.hpp"
#include "placement/node_pool.hpp"
#include "placement/range_list.hpp"

namespace memkit::placement {

template <class Node>
class range_placer {
 public:
  // The one range [0, size) of a new container: free, not filed yet.
  Node* make_container(std::uint64_t size) {
    Node* whole = records_.make();
    whole->size = size;
    return whole;
  }

  // Free ranges go into the index (file) and out of it (unfile) around every
  // change; only filed ranges are found, and merged by release.
  void file(Node* n) {
    if (!by_offset_) {
      index_.insert(n);
      return;
    }
    n->indexed = true;
    n->bin = free_index::bin_of(n->size);
    offset_index_.insert(lower_bound_offset(n->offset), {n->offset, n});
  }
  void unfile(Node* n) {
    if (!by_offset_) {
      index_.remove(n);
      return;
    }
    n->indexed = false;
    offset_index_.erase(lower_bound_offset(n->offset));
  }
  // Recycles a range's record (unfiled first, where it is filed).
  void discard(Node* n) {
    if (n->indexed) unfile(n);
    records_.recycle(n);
  }

  // The best filed range of at least `size` bytes that accept(range) takes: best
  // fit in the request's bin, first fit above it (free_index::find).
  template <class Accept>
  Node* find(std::uint64_t size, Accept&& accept) const {
    return static_cast<Node*>(
        index_.find(size, [&](free_node* n) { return accept(static_cast<Node*>(n)); }));
  }
  // Calls visit(range) on filed ranges of at least `size` bytes, smallest bins
  // first, until it returns true.
  template <class Visit>
  void visit_fits(std::uint64_t size, Visit&& visit) const {
    index_.visit_fits(size, [&](free_node* n) { return visit(static_cast<Node*>(n)); });
  }

  // n keeps its first `head` bytes; the rest becomes a new range, unfiled, that
  // inherits n's state.
  Node* split(Node* n, std::uint64_t head) {
    Node* rest = records_.make();
    rest->inherit(*n);
    placement::split(n, head, rest);
    return rest;
  }
  // lower absorbs upper, the range just above it; upper's record is recycled.
  // Neither is filed.
  Node* merge(Node* lower, Node* upper) {
    absorb_next(lower);
    records_.recycle(upper);
    return lower;
  }
  // A freed range, unfiled, merges with its filed neighbours, below and then above,
  // for as long as may_merge(lower, upper) allows; returns the range it became,
  // unfiled. may_merge may set what the union keeps (lower's state) before saying yes.
  template <class MayMerge>
  Node* release(Node* n, MayMerge&& may_merge) {
    for (auto* lower = static_cast<Node*>(n->prev_range); lower && lower->indexed;
         lower = static_cast<Node*>(n->prev_range)) {
      if (!may_merge(lower, n)) break;
      unfile(lower);
      n = merge(lower, n);
    }
    for (auto* upper = static_cast<Node*>(n->next_range); upper && upper->indexed;
         upper = static_cast<Node*>(n->next_range)) {
      if (!may_merge(n, upper)) break;
      unfile(upper);
      n = merge(n, upper);
    }
    return n;
  }

  // Filed ranges by offset instead of by size, for find_at (a loop plan's region:
  // one container, blocks at planned offsets); find and visit_fits then see
  // nothing. Set before the first range is filed.
  void set_index_by_offset(bool on) { by_offset_ = on; }
  // The filed range holding [offset, offset + size), or nullptr; needs the above.
  Node* find_at(std::uint64_t offset, std::uint64_t size) const {
    auto it = std::upper_bound(offset_index_.begin(), offset_index_.end(), offset,
                               [](std::uint64_t o, const offset_entry& e) { return o < e.first; });
    if (it == offset_index_.begin()) return nullptr;
    Node* n = std::prev(it)->second;
    return n->offset + n->size >= offset + size ? n : nullptr;
  }
  // Calls f(offset, range) for every entry of the offset index.
  template <class F>
  void for_each_by_offset(F&& f) const {
    for (const auto& [offset, n] : offset_index_) f(offset, static_cast<const Node*>(n));
  }
  // Calls visit(range) on entries of the offset index of at least `size` bytes, lowest
  // first, until it returns true.
  template <class Visit>
  void visit_fits_by_offset(std::uint64_t size, Visit&& visit) const {
    for (const auto& entry : offset_index_) {
      if (entry.second->size >= size && visit(static_cast<const Node*>(entry.second))) return;
    }
  }

  std::uint64_t calculate_largest() const {
    if (!by_offset_) return index_.calculate_largest();
    std::uint64_t largest = 0;
    for (const auto& entry : offset_index_) largest = std::max(largest, entry.second->size);
    return largest;
  }
  std::uint64_t get_filed_count() const {
    return by_offset_ ? offset_index_.size() : index_.get_count();
  }

 private:
  free_index index_;
  bool by_offset_ = false;
  // The offset index: filed ranges sorted by offset, in one array (a plan's region
  // holds a handful of free ranges, filed and unfiled on every request: an array
  // touches a cache line or two where a tree chased a node per level).
  using offset_entry = std::pair<std::uint64_t, Node*>;
  std::vector<offset_entry> offset_index_;
  typename std::vector<offset_entry>::iterator lower_bound_offset(std::uint64_t offset) {
    return std::lower_bound(offset_index_.begin(), offset_index_.end(), offset,
                            [](const offset_entry& e, std::uint64_t o) { return e.first < o; });
  }
  node_pool<Node> records_;
};

}  // namespace memkit::placement
