// The arrays context: the handles of one device and queue, the buffers their
// memory lives in, and the backend's aliasing rule.
//
// Buffers. The context takes buffers from the allocator (each one memkit
// allocation) and places handles inside them with the placement layer's sub-range
// placer (the segment pools' own), best fit over every buffer a placement may use.
// Every free range knows its buffer, so a placement can exclude buffers: under
// the WebGPU rule a kernel's writable bindings never land in a buffer that one of
// its read-only bindings uses, and the reverse.
//
// Buffer sizes. Shared buffers grow with the pool: a new one is 1/growth_divisor
// of the bytes held, rounded up to min_buffer_bytes, at most buffer_bytes. So a
// pool is always several buffers, and an output the rule excludes from its
// inputs' buffers usually finds room in another; a pool never holds a large
// buffer its working set does not need. A buffer opened only because the rule
// excluded every buffer with room is sized to the request. Requests above
// dedicated_above get a buffer of their own size.
//
// Reuse. A context serves one queue. Memory released after its kernels were
// submitted is reused at once by later work on that queue (queue order makes it
// safe); buffers go back to the allocator with its queue-ordered free, and
// record_use() holds a handle's memory for work on another queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "memkit/allocator.hpp"
#include "memkit/arrays/aliasing.hpp"
#include "memkit/arrays/handle.hpp"

namespace memkit::arrays {

struct context_options {
  aliasing_rule rule = aliasing_rule::none;
  queue_id queue = 0;
  std::size_t buffer_bytes = std::size_t{16} << 20;  // largest shared buffer
  // Smallest shared buffer, and the unit of their sizes; 0: every one is buffer_bytes.
  std::size_t min_buffer_bytes = std::size_t{1} << 20;
  std::size_t growth_divisor = 32;  // a new shared buffer: bytes held / growth_divisor
  std::size_t dedicated_above = 0;  // requests above this get their own buffer; 0: buffer_bytes / 2
  std::size_t empty_buffers_kept = 2;  // empty shared buffers kept after a submit
  // Every handle in a buffer of its own, cached for reuse by equal sizes only:
  // what a framework does on the web when it cannot sub-allocate. A baseline.
  bool buffer_per_tensor = false;
};

struct context_statistics {
  std::size_t buffers = 0;            // buffers held
  std::size_t buffer_bytes = 0;       // bytes in them
  std::size_t peak_buffer_bytes = 0;  // largest buffer_bytes
  std::size_t live_bytes = 0;         // bytes placed for bound handles
  std::size_t peak_live_bytes = 0;
  std::size_t requested_bytes = 0;  // handles' own bytes, bound and live
  std::size_t peak_requested_bytes = 0;
  std::uint64_t handles_created = 0;
  std::uint64_t placements = 0;           // handles bound (and rebound)
  std::uint64_t relocations = 0;          // bindings moved to keep to the rule
  std::uint64_t relocation_copies = 0;    // of which needed a copy kernel
  std::uint64_t relocated_bytes = 0;      // bytes those copies moved
  std::uint64_t buffers_created = 0;      // allocator calls for buffers
  std::uint64_t excluded_placements = 0;  // placements where the rule excluded a buffer
  std::uint64_t rule_buffers = 0;         // buffers opened because the rule excluded all with room
};

class context {
 public:
  explicit context(allocator& memory, context_options options = {});
  ~context();  // frees every buffer; handles still alive must not be used after
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  // A handle of `bytes` with no memory; bound at its first submitted kernel.
  // Lock-free: one atomic increment and one small heap record.
  handle empty(std::size_t bytes);

  // The handle's memory is also used by work on `queue`: once released, it is not
  // reused until that queue's work submitted so far completes.
  void record_use(const handle& target, queue_id queue);

  aliasing_rule get_rule() const noexcept;
  queue_id get_queue() const noexcept;
  const context_options& get_options() const noexcept;
  allocator& get_allocator() const noexcept;
  context_statistics get_statistics() const;
  std::size_t get_buffer_size(std::uint32_t buffer) const;  // also of buffers since freed
  void reset_peak();
  // Gives every empty buffer back to the allocator.
  void trim();

 private:
  friend class encoder;
  detail::context_state& get_state() const noexcept { return *state_; }
  std::unique_ptr<detail::context_state> state_;
};

}  // namespace memkit::arrays
