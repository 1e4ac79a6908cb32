// Recording an allocator's calls as a memkit trace that `memkit replay` reads back:
// one line per successful allocate or free, with the block's address as its id, the
// bytes asked for, the queue and the moment in ns since recording began.
//
//   # source: memkit recorder (<device>)
//   a,<address>,<bytes>,<queue>,<ns>
//   f,<address>,<ns>
//
// Blocks live when recording starts are not in the trace: their frees are left out
// too, so the trace stays one a replay accepts. The recorder outlives every
// recording of its allocator (stop closes the file, the object stays), so a call on
// another thread never finds it gone.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_set>

#include "memkit/types.hpp"

namespace memkit {

class recorder {
 public:
  ~recorder() { stop(); }
  // Opens `path` (replacing it) and writes the header; throws invalid_argument
  // naming the path when it cannot be opened. A recording under way is stopped first.
  void start(const std::string& path, const std::string& device_name);
  // Flushes and closes; returns the events written (0 when none was under way).
  std::uint64_t stop();
  void on_allocate(address_t address, std::size_t bytes, queue_id queue);
  void on_free(address_t address);

 private:
  std::uint64_t get_ns() const;
  std::mutex mutex_;
  std::FILE* file_ = nullptr;               // the recording's file, null when none
  std::string path_;                        // its path, for messages
  std::unordered_set<address_t> recorded_;  // blocks whose allocation is in the trace
  std::chrono::steady_clock::time_point start_;
  std::uint64_t events_ = 0;   // lines written since start
  bool write_failed_ = false;  // a write failed: said once, at stop
};

}  // namespace memkit
