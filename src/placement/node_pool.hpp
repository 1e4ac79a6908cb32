// Fixed-size records recycled through a free list, so splitting and merging
// blocks on the hot path never calls the system allocator. Records are built
// once and never destroyed until the pool is: a recycled record is reset with
// T::reset(), which leaves any field other threads may read atomically alone.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
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

// Freed memory of one size, kept for the next allocation of that size.
class free_list {
 public:
  free_list() = default;
  free_list(const free_list&) = delete;
  free_list& operator=(const free_list&) = delete;
  ~free_list() {
    while (head_) {
      void* next = *static_cast<void**>(head_);
      ::operator delete(head_);
      head_ = next;
    }
  }
  void* take(std::size_t size) {
    if (!head_ || size != size_) return ::operator new(size);
    void* p = head_;
    head_ = *static_cast<void**>(p);
    return p;
  }
  void give(void* p, std::size_t size) {
    if (size < sizeof(void*) || (size_ != 0 && size != size_)) return ::operator delete(p);
    size_ = size;
    *static_cast<void**>(p) = head_;
    head_ = p;
  }

 private:
  void* head_ = nullptr;
  std::size_t size_ = 0;  // the one size kept
};

// A standard allocator over a free_list, for the nodes of a std::map on the hot
// path: single objects are recycled, arrays go to the heap.
template <class T>
struct recycling_allocator {
  using value_type = T;
  free_list* list;
  explicit recycling_allocator(free_list* l) : list(l) {}
  template <class U>
  recycling_allocator(const recycling_allocator<U>& other) : list(other.list) {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(n == 1 ? list->take(sizeof(T)) : ::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) {
    if (n == 1)
      list->give(p, sizeof(T));
    else
      ::operator delete(p);
  }
  template <class U>
  bool operator==(const recycling_allocator<U>& other) const {
    return list == other.list;
  }
};

}  // namespace memkit::placement
