// Fixed-size records recycled through a free list, so splitting and merging
// blocks on the hot path never calls the system allocator. Records are built
// once and never destroyed until the pool is: a recycled record is reset with
// T::reset(), which leaves any field other threads may read atomically alone.
#pragma once

#include <memory>
#include <vector>

namespace memkit::placement {

template <class T>
class node_pool {
 public:
  T* make() {
    if (free_.empty()) grow();
    T* node = free_.back();
    free_.pop_back();
    node->reset();
    return node;
  }
  void recycle(T* node) { free_.push_back(node); }

 private:
  void grow() {
    constexpr std::size_t kChunk = 256;
    chunks_.push_back(std::make_unique<T[]>(kChunk));
    for (std::size_t i = 0; i < kChunk; ++i) free_.push_back(&chunks_.back()[i]);
  }
  std::vector<T*> free_;
  std::vector<std::unique_ptr<T[]>> chunks_;
};

}  // namespace memkit::placement
