// Ranges that tile a segment in address order, with split and merge: numbers only.
#pragma once

#include <cstdint>

#include "placement/free_index.hpp"

namespace memkit::placement {

struct range_node : free_node {
  std::uint64_t offset = 0;          // from the start of the segment
  range_node* prev_range = nullptr;  // the range just below, in the same segment
  range_node* next_range = nullptr;  // the range just above
};

// node keeps its first `head` bytes; `rest` takes the remainder and follows it.
inline void split(range_node* node, std::uint64_t head, range_node* rest) {
  rest->offset = node->offset + head;
  rest->size = node->size - head;
  rest->prev_range = node;
  rest->next_range = node->next_range;
  if (node->next_range) node->next_range->prev_range = rest;
  node->next_range = rest;
  node->size = head;
}

// node absorbs the range just above it, which the caller then discards.
inline range_node* absorb_next(range_node* node) {
  range_node* upper = node->next_range;
  node->size += upper->size;
  node->next_range = upper->next_range;
  if (upper->next_range) upper->next_range->prev_range = node;
  return upper;
}

}  // namespace memkit::placement
