// Live block by address: open addressing with linear probing and backward-shift
// deletion (no tombstones), kept at most half full. Addresses are never 0.
#pragma once

#include <cstdint>
#include <vector>

#include "memkit/types.hpp"

namespace memkit::pools {

template <class V>
class address_map {
 public:
  address_map() : slots_(1024) {}

  V* find(address_t key) const {
    for (std::size_t i = index_of(key);; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
  }

  void insert(address_t key, V* value) {
    if (2 * (size_ + 1) > slots_.size()) rehash(slots_.size() * 2);
    std::size_t i = index_of(key);
    while (slots_[i].key != 0) i = (i + 1) & mask();
    slots_[i] = {key, value};
    ++size_;
  }

  // Removes key, which must be present.
  void erase(address_t key) {
    std::size_t hole = index_of(key);
    while (slots_[hole].key != key) hole = (hole + 1) & mask();
    for (std::size_t i = (hole + 1) & mask(); slots_[i].key != 0; i = (i + 1) & mask()) {
      // Move back an entry whose home slot is not in (hole, i].
      const std::size_t home = index_of(slots_[i].key);
      if (((i - home) & mask()) >= ((i - hole) & mask())) {
        slots_[hole] = slots_[i];
        hole = i;
      }
    }
    slots_[hole] = {};
    --size_;
  }

  std::size_t size() const { return size_; }

  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.key) f(s.key, s.value);
  }

 private:
  struct Slot {
    address_t key = 0;
    V* value = nullptr;
  };
  std::size_t mask() const { return slots_.size() - 1; }
  std::size_t index_of(address_t key) const {
    return static_cast<std::size_t>((key >> 8) * 0x9E3779B97F4A7C15ull >> 20) & mask();
  }
  void rehash(std::size_t capacity) {
    std::vector<Slot> old(capacity);
    old.swap(slots_);
    size_ = 0;
    for (const Slot& s : old)
      if (s.key) insert(s.key, s.value);
  }
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace memkit::pools
