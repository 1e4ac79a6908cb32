// Fixed-size records recycled through a free list, so splitting and merging
// blocks on the hot path never calls the system allocator.
#pragma once

#include <memory>
#include <vector>

namespace memkit::pools {

template <class T>
class node_pool {
 public:
  T* make() {
    if (!free_) grow();
    Slot* slot = free_;
    free_ = slot->next;
    return new (slot->storage) T();
  }
  void recycle(T* node) {
    node->~T();
    auto* slot = reinterpret_cast<Slot*>(node);
    slot->next = free_;
    free_ = slot;
  }

 private:
  union Slot {
    Slot* next;
    alignas(T) unsigned char storage[sizeof(T)];
  };
  void grow() {
    constexpr std::size_t kChunk = 256;
    chunks_.push_back(std::make_unique<Slot[]>(kChunk));
    Slot* chunk = chunks_.back().get();
    for (std::size_t i = 0; i < kChunk; ++i) {
      chunk[i].next = free_;
      free_ = &chunk[i];
    }
  }
  Slot* free_ = nullptr;
  std::vector<std::unique_ptr<Slot[]>> chunks_;
};

}  // namespace memkit::pools
