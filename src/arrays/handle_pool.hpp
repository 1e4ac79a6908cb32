// The context's state: the buffers handles live in and the offsets inside them,
// placed by the sub-range placer the segment pools use too
// (placement/range_placer.hpp). Every free range of every held buffer is in its one
// index, and a range knows its buffer, so a placement excludes buffers with one
// accept test.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "memkit/arrays/context.hpp"
#include "placement/range_placer.hpp"

namespace memkit::arrays::detail {

struct pool_block : placement::range_node {
  std::uint32_t buffer = 0;
  std::uint64_t requested = 0;  // the handle's bytes while live
  bool live = false;

  void reset() { *this = pool_block{}; }  // the placer recycles records through it
  void inherit(const pool_block& from) { buffer = from.buffer; }  // a range split off `from`
};

struct pool_buffer {
  allocation memory;
  std::size_t size = 0;         // bytes the arrays layer uses (<= memory.size)
  pool_block* first = nullptr;  // lowest range
  std::size_t live_bytes = 0;
  bool dedicated = false;           // made for one large request
  bool held = false;                // false once given back to the allocator
  std::uint64_t release_epoch = 0;  // the context's epoch at the last release
};

// Memory released while work on another queue may still use it.
struct deferred_release {
  pool_block* block = nullptr;
  fence other;
};

struct context_state {
  context_state(allocator& memory_in, const context_options& options_in);
  ~context_state();

  // All below with `mutex` held. place() may drop the lock to ask the allocator
  // for a buffer (never a lock held across a call that may reach the backend).
  pool_block* place(std::uint64_t bytes, std::span<const std::uint32_t> excluded,
                    std::unique_lock<std::mutex>& lock);
  void release(pool_block* block);
  void destroy(handle_state* state);  // without the lock: the last reference went
  // Removes empty buffers from the pool beyond `keep_shared` empty shared ones
  // (dedicated and per-tensor buffers only when `all`) and returns their memory,
  // for the caller to free outside the lock.
  std::vector<allocation> take_empty_buffers(std::size_t keep_shared, bool all);
  void free_buffers(const std::vector<allocation>& buffers);  // without the lock
  void release_completed_deferred();                          // without the lock

  allocator& memory;
  context_options options;
  std::size_t alignment = 256;
  std::atomic<handle_id> next_id{1};
  // Advanced after every submit: memory released in the current epoch may still
  // be used by a batch that has not reached the queue yet.
  std::uint64_t epoch = 1;
  std::size_t open_batches = 0;  // encoders with dispatches not yet submitted

  mutable std::mutex mutex;
  std::vector<pool_buffer> buffers;            // index is the buffer id; ids are never reused
  placement::range_placer<pool_block> ranges;  // of shared and dedicated buffers
  std::vector<deferred_release> deferred;
  std::map<std::size_t, std::vector<std::uint32_t>> free_by_size;  // buffer_per_tensor cache
  context_statistics stats;

 private:
  pool_block* try_place(std::uint64_t aligned, std::span<const std::uint32_t> excluded);
  pool_block* take_whole(std::uint32_t buffer);
  std::uint32_t add_buffer(allocation memory_block, std::size_t size, bool dedicated);
  void mark_live(pool_block* block, std::uint64_t requested);
};

}  // namespace memkit::arrays::detail
