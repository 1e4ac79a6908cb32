// Handles: long-lived, reference-counted owners of an array's memory.
//
// A handle is created by context::empty(bytes) with an id and no memory: the id
// comes from an atomic counter on the caller's side, with no lock and no call to
// the allocator or the backend. Memory is bound when the first kernel that uses
// the handle is submitted through an encoder, which knows everything else that
// kernel (and the rest of its batch) binds.
//
// Two counts live in a handle's state:
//   owners      handles that own it; can_mut() is owners == 1, so a kernel may
//               write its output in place over it.
//   references  owners plus the encoder's pins, one per queued binding. Memory is
//               released when references reaches 0, so dropping the last handle
//               while bindings are queued frees the memory after the batch is
//               submitted, never before.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace memkit::arrays {

using handle_id = std::uint64_t;
class context;
class encoder;

namespace detail {
struct context_state;
struct pool_block;

struct handle_state {
  handle_id id = 0;
  std::size_t bytes = 0;
  context_state* context = nullptr;
  std::atomic<std::uint32_t> owners{1};
  std::atomic<std::uint32_t> references{1};
  // Where the memory is, once bound. Written under the context's lock.
  pool_block* block = nullptr;
  std::atomic<bool> bound{false};
  // Work on another queue that uses the memory (record_use): its reuse waits for it.
  bool other_use = false;
  std::uint32_t other_queue = 0;
  std::uint64_t other_fence = 0;

  void release_reference() noexcept;  // the last one releases the memory
};
}  // namespace detail

// Where a bound handle's bytes are.
struct buffer_range {
  std::uint32_t buffer = 0;  // the arrays layer's buffer id
  std::uint64_t offset = 0;  // from the buffer's start
  std::uint64_t size = 0;    // the handle's bytes
};

class handle {
 public:
  handle() = default;
  handle(const handle& other) noexcept : state_(other.state_) {
    if (state_) {
      state_->owners.fetch_add(1, std::memory_order_relaxed);
      state_->references.fetch_add(1, std::memory_order_relaxed);
    }
  }
  handle(handle&& other) noexcept : state_(other.state_) { other.state_ = nullptr; }
  handle& operator=(handle other) noexcept {
    std::swap(state_, other.state_);
    return *this;
  }
  ~handle() { reset(); }

  void reset() noexcept {
    if (!state_) return;
    state_->owners.fetch_sub(1, std::memory_order_acq_rel);
    state_->release_reference();
    state_ = nullptr;
  }

  explicit operator bool() const noexcept { return state_ != nullptr; }
  handle_id get_id() const noexcept { return state_ ? state_->id : 0; }
  std::size_t get_size() const noexcept { return state_ ? state_->bytes : 0; }
  // The only owner: a kernel may write over this handle's memory in place.
  bool can_mut() const noexcept {
    return state_ && state_->owners.load(std::memory_order_acquire) == 1;
  }
  // Memory has been bound (by the first submitted kernel that uses the handle).
  bool is_bound() const noexcept { return state_ && state_->bound.load(std::memory_order_acquire); }
  // Where the bytes are, once bound (takes the context's lock).
  std::optional<buffer_range> get_range() const;

 private:
  friend class context;
  friend class encoder;
  explicit handle(detail::handle_state* state) noexcept : state_(state) {}
  detail::handle_state* get_state() const noexcept { return state_; }
  detail::handle_state* state_ = nullptr;
};

}  // namespace memkit::arrays
