// The memory interface every backend implements (docs/ARCHITECTURE.md, "The backend
// interfaces"): all the allocator sees of a device. A backend hands out raw segments,
// optionally reserves address space and maps physical pages into it, and runs
// queues whose fences complete in order. It holds no policy: the allocator decides
// what to ask for and when. What a backend offers beyond memory is a capability, a
// class it also derives from, found with find_capability: the data interface for
// the arrays layer (memkit/device_data.hpp), peer access and sharing with other
// processes (memkit/capabilities.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "memkit/errors.hpp"
#include "memkit/types.hpp"

namespace memkit {

struct device_facts {
  std::string name;               // "cpu", "sim", "cuda:0", ...
  std::size_t capacity = 0;       // bytes of memory the device has
  std::size_t granularity = 1;    // segment sizes are rounded up to a multiple of this
  std::size_t max_buffer = 0;     // largest single segment
  std::size_t alignment = 256;    // every block offset is a multiple of this
  std::size_t max_wired = 0;      // most bytes that may be kept resident
  std::uint32_t queue_count = 1;  // queues 0 .. queue_count-1 exist
  bool unified = false;           // host and device views are one pointer
  bool virtual_memory = false;    // reserve_range / create_page / map / unmap work
  bool queue_ordering = false;    // order_after works: one queue waits for another's fence
};

class backend {
 public:
  virtual ~backend() = default;
  virtual const device_facts& get_facts() const noexcept = 0;

  // Segments. allocate_segment returns 0 when the device has no room.
  virtual address_t allocate_segment(std::size_t bytes) = 0;
  virtual void free_segment(address_t address, std::size_t bytes) = 0;

  // Queues. get_submitted is the fence value that covers all work submitted so
  // far on the queue (it may record a new fence); get_completed is the highest
  // value known complete; wait blocks until the fence completes.
  virtual fence_value get_submitted(queue_id queue) = 0;
  virtual fence_value get_completed(queue_id queue) const = 0;
  virtual void wait(fence f) = 0;
  // Makes work submitted to `queue` from now on start only after fence `f` (of
  // another queue) completes, on the device, without blocking the host. False
  // where the backend cannot (get_facts().queue_ordering is false, or the queue
  // cannot take the dependency now); then nothing changed.
  virtual bool order_after(queue_id /*queue*/, fence /*f*/) { return false; }

  // Residency: the allocator tells the backend how many bytes it may keep wired.
  virtual void set_wired_limit(std::size_t /*bytes*/) {}

  // Virtual memory (only where get_facts().virtual_memory). Sizes and offsets are
  // multiples of the granularity. reserve_range and create_page return 0 on failure.
  virtual address_t reserve_range(std::size_t /*bytes*/) { return 0; }
  virtual void release_range(address_t /*base*/, std::size_t /*bytes*/) {}
  virtual page_id create_page(std::size_t /*bytes*/) { return 0; }
  virtual void release_page(page_id /*page*/, std::size_t /*bytes*/) {}
  virtual void map(address_t /*at*/, page_id /*page*/, std::size_t /*bytes*/) {}
  // Makes mapped pages usable by the device; called once over a run of pages
  // mapped together, since on CUDA it is the costly step.
  virtual void set_access(address_t /*at*/, std::size_t /*bytes*/) {}
  virtual void unmap(address_t /*at*/, std::size_t /*bytes*/) {}
};

// The memory interface of a backend an adaptor wraps (a device set's budget, the
// replay's watcher): every call goes to the wrapped backend; an adaptor overrides
// the calls it counts or notes.
class forwarded_memory : public backend {
 public:
  explicit forwarded_memory(backend& wrapped) noexcept : upstream_(wrapped) {}

  const device_facts& get_facts() const noexcept override { return upstream_.get_facts(); }
  address_t allocate_segment(std::size_t bytes) override {
    return upstream_.allocate_segment(bytes);
  }
  void free_segment(address_t address, std::size_t bytes) override {
    upstream_.free_segment(address, bytes);
  }
  fence_value get_submitted(queue_id queue) override { return upstream_.get_submitted(queue); }
  fence_value get_completed(queue_id queue) const override {
    return upstream_.get_completed(queue);
  }
  void wait(fence f) override { upstream_.wait(f); }
  bool order_after(queue_id queue, fence f) override { return upstream_.order_after(queue, f); }
  void set_wired_limit(std::size_t bytes) override { upstream_.set_wired_limit(bytes); }
  address_t reserve_range(std::size_t bytes) override { return upstream_.reserve_range(bytes); }
  void release_range(address_t base, std::size_t bytes) override {
    upstream_.release_range(base, bytes);
  }
  page_id create_page(std::size_t bytes) override { return upstream_.create_page(bytes); }
  void release_page(page_id page, std::size_t bytes) override {
    upstream_.release_page(page, bytes);
  }
  void map(address_t at, page_id page, std::size_t bytes) override {
    upstream_.map(at, page, bytes);
  }
  void set_access(address_t at, std::size_t bytes) override { upstream_.set_access(at, bytes); }
  void unmap(address_t at, std::size_t bytes) override { upstream_.unmap(at, bytes); }

  backend& get_upstream() const noexcept { return upstream_; }

 protected:
  backend& upstream_;
};

// A capability the backend offers (device_data, peer_access, memory_sharing), or
// nullptr where it offers none.
template <class Capability>
Capability* find_capability(backend& device) noexcept {
  return dynamic_cast<Capability*>(&device);
}
template <class Capability>
const Capability* find_capability(const backend& device) noexcept {
  return dynamic_cast<const Capability*>(&device);
}

}  // namespace memkit
