// Device-aware buffers: one allocation API for unified and discrete memory.
//
// A framework allocates for a device and a dtype and touches the bytes through
// two views; it never asks whether the device shares memory with the host.
//
//   unified device, same layout   one block, host view == device view, zero copies
//   discrete device (or a layout  a device block, allocated at the first device use,
//   that differs on the device)   and a host copy, made at the first host access;
//                                 each side is current or stale:
//
//   access on a side   stale side with a current other side   then
//   read               copy it over first                     other side unchanged
//   read_write         copy it over first                     other side stale
//   write              nothing (every element is rewritten)   other side stale
//
// So data moves only when the other side is next used, and only then. Every
// copy and its device bytes is counted in buffer_statistics. Host views show
// the framework's layout (storage_layout); conversion happens in the transfer.
//
// A buffer is owned by one thread at a time, like the array holding it; the
// buffer_allocator may be shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>

#include "memkit/allocator.hpp"
#include "memkit/arrays/aliasing.hpp"  // access: read, write (every byte), read_write
#include "memkit/arrays/layout.hpp"
#include "memkit/device_data.hpp"

namespace memkit::arrays {

struct buffer_statistics {
  std::uint64_t copies_to_device = 0;  // uploads
  std::uint64_t copies_to_host = 0;    // downloads
  std::size_t bytes_to_device = 0;     // stored (device-layout) bytes uploaded
  std::size_t bytes_to_host = 0;       // stored bytes downloaded
  std::uint64_t device_allocations = 0;
  std::uint64_t host_allocations = 0;  // separate host copies (never on zero-copy buffers)
  std::size_t device_bytes = 0;        // stored bytes of live device blocks
  std::size_t peak_device_bytes = 0;
  std::size_t host_bytes = 0;  // bytes of live separate host copies
  std::size_t peak_host_bytes = 0;
  std::size_t buffers = 0;  // live buffers

  friend bool operator==(const buffer_statistics&, const buffer_statistics&) = default;
};

struct buffer_allocator_options {
  // The storage rules; by default the device's (get_storage_rules). Set them to
  // lay out buffers for WebGPU on another device, e.g. to test conversions.
  std::optional<storage_rules> rules;
};

class buffer;

class buffer_allocator {
 public:
  // Throws invalid_argument where the allocator's backend has no data interface
  // (memkit/device_data.hpp).
  explicit buffer_allocator(allocator& memory, buffer_allocator_options options = {});
  buffer_allocator(const buffer_allocator&) = delete;
  buffer_allocator& operator=(const buffer_allocator&) = delete;

  // A buffer of `count` elements, with no memory yet. Throws invalid_argument when
  // its stored size exceeds the device's largest binding (device_facts::max_buffer).
  buffer allocate(dtype type, std::size_t count, queue_id queue = 0);

  storage_layout get_layout(dtype type) const noexcept;
  const storage_rules& get_rules() const noexcept { return rules_; }
  // Host and device views of this dtype are one allocation.
  bool is_zero_copy(dtype type) const noexcept;
  buffer_statistics get_statistics() const;
  allocator& get_allocator() const noexcept { return memory_; }

 private:
  friend class buffer;
  allocator& memory_;
  backend& device_;    // memory: facts, queues and fences
  device_data& data_;  // data: transfers and the host view
  storage_rules rules_;
  mutable std::mutex mutex_;  // guards statistics_; never held across a backend call
  buffer_statistics statistics_;
};

class buffer {
 public:
  buffer() = default;
  buffer(buffer&& other) noexcept;
  buffer& operator=(buffer&& other) noexcept;
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer();

  dtype get_dtype() const noexcept { return layout_.type; }
  std::size_t get_count() const noexcept { return count_; }
  const storage_layout& get_layout() const noexcept { return layout_; }
  std::size_t get_host_bytes() const noexcept { return layout_.get_host_bytes(count_); }
  std::size_t get_stored_bytes() const noexcept { return layout_.get_stored_bytes(count_); }
  bool is_zero_copy() const noexcept { return zero_copy_; }

  // The host view, in the framework's layout, current for `mode`. Valid until the
  // next device access of this buffer. nullptr for an empty buffer.
  void* get_host(access mode);
  template <class T>
  std::span<T> get_host_span(access mode) {
    return {static_cast<T*>(get_host(mode)), get_host_bytes() / sizeof(T)};
  }
  // The device view: get_stored_bytes() in the device's layout, current for `mode`,
  // for work on `queue`. 0 for an empty buffer.
  address_t get_device(access mode, queue_id queue = 0);

  // Which sides exist and hold the current data (for tests and reports).
  bool has_host_copy() const noexcept { return host_ != nullptr; }
  bool has_device_block() const noexcept { return device_ != 0; }
  bool is_host_current() const noexcept { return host_current_; }
  bool is_device_current() const noexcept { return device_current_; }

 private:
  friend class buffer_allocator;
  buffer(buffer_allocator& owner, storage_layout layout, std::size_t count, queue_id queue);
  void allocate_device();
  void allocate_host();
  void release() noexcept;
  void wait_for_device();

  buffer_allocator* owner_ = nullptr;
  storage_layout layout_;
  std::size_t count_ = 0;
  queue_id queue_ = 0;                // the queue the device block was allocated for
  queue_id write_queue_ = 0;          // the queue of the last device access that wrote
  std::uint64_t used_queues_ = 0;     // bit q: record_use(q) made
  std::uint64_t pending_queues_ = 0;  // bit q: device work queued on q since the host looked
  address_t device_ = 0;
  unsigned char* host_ = nullptr;  // a separate host copy; on zero-copy buffers, unused
  bool zero_copy_ = false;
  bool host_current_ = false;
  bool device_current_ = false;
};

}  // namespace memkit::arrays
