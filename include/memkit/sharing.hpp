// Sharing blocks with other processes.
//
//   memory_sharing     the backend capability underneath (memkit/capabilities.hpp):
//                      a block described for another process and mapped there.
//   memory_exporter    serves the blocks of a device_set on a Unix socket. Each
//                      importer holds one connection for as long as it holds the
//                      import; the exporter watches the connections, so an importer
//                      that exits or is killed is seen gone when the kernel closes
//                      its socket. A shared block stays live (the allocator cannot
//                      reuse it) until its owner has released it and no importer
//                      holds it; then the exporter frees it.
//   imported_memory    the importing side: connects, receives the description and
//                      its file descriptors (SCM_RIGHTS), maps it, and on close
//                      unmaps before closing the connection.
//
// What the socket protocol cannot see: work an importer queued on the GPU before it
// was killed. A killed process's GPU work is torn down by the driver with its
// context; the exporter sees the socket close at process exit, which the kernel may
// do before the driver has finished that teardown. Importers that exit normally
// synchronize before closing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memkit/capabilities.hpp"
#include "memkit/devices.hpp"

namespace memkit {

class memory_exporter {
 public:
  // Serves `devices`' blocks on the Unix socket `socket_path` (made here, removed
  // on destruction). The set must outlive the exporter. Every device whose blocks
  // are shared must implement memory_sharing.
  memory_exporter(device_set& devices, std::string socket_path);
  // Stops serving and closes every connection; blocks still shared go back to
  // their allocators.
  ~memory_exporter();
  memory_exporter(const memory_exporter&) = delete;
  memory_exporter& operator=(const memory_exporter&) = delete;

  // Makes a live block importable; returns its id. The block stays the caller's
  // until release(id). Throws invalid_argument where the backend cannot share it.
  std::uint64_t share(const device_allocation& allocation);
  // The owner is done: the block goes back to its allocator once no importer
  // holds it (at once when none does). New imports of the id are refused.
  void release(std::uint64_t id);

  std::size_t get_importer_count(std::uint64_t id) const;  // 0 for unknown ids
  bool is_held(std::uint64_t id) const;  // the block is still out of the allocator's hands
  std::size_t get_held_count() const;    // blocks held for importers or owners
  // Blocks until `id` has no importer, or `timeout` passes; returns whether it has none.
  bool wait_until_unimported(std::uint64_t id, std::chrono::milliseconds timeout) const;
  // Blocks until `id` has at least `count` importers, or `timeout` passes.
  bool wait_for_importers(std::uint64_t id, std::size_t count,
                          std::chrono::milliseconds timeout) const;
  const std::string& get_socket_path() const noexcept;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

class imported_memory {
 public:
  // Connects to the exporter at `socket_path`, asks for block `id` and maps it
  // through `device` (which must implement memory_sharing). Throws
  // invalid_argument when the exporter refuses (unknown or released id), and
  // os_error when the socket cannot be reached.
  imported_memory(backend& device, const std::string& socket_path, std::uint64_t id);
  ~imported_memory();  // close()
  imported_memory(const imported_memory&) = delete;
  imported_memory& operator=(const imported_memory&) = delete;

  address_t get_address() const noexcept;  // the block, mapped here
  std::size_t get_size() const noexcept;
  const shared_memory& get_description() const noexcept;  // (its fds already taken)
  // Unmaps, then closes the connection: the exporter sees this import gone.
  void close();

 private:
  memory_sharing* sharing_ = nullptr;
  int connection_ = -1;
  address_t address_ = 0;
  shared_memory description_;
};

}  // namespace memkit
