// Sharing blocks with other processes.
//
//   memory_sharing     a backend capability: describe a block for another process
//                      (export_memory) and map such a description here
//                      (import_memory / close_import). CUDA: virtual memory travels
//                      as one POSIX file descriptor per physical allocation under the
//                      block (cuMemExportToShareableHandle; the pages must have been
//                      created exportable), cudaMalloc segments as a legacy IPC handle
//                      of the whole segment plus the block's offset in it. sim: the
//                      block's address, checked and counted.
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

#include "memkit/backend.hpp"
#include "memkit/devices.hpp"

namespace memkit {

// A block described for another process. Move-only: it owns the file descriptors
// that travel with it (closed on destruction unless taken).
struct shared_memory {
  enum class kind : std::uint32_t {
    sim = 1,           // `address` is the block; nothing travels but the description
    cuda_virtual = 2,  // one fd a physical allocation, in address order
    cuda_ipc = 3,      // `handle` is a cudaIpcMemHandle_t of the segment
  };
  kind type = kind::sim;
  std::uint32_t device = 0;                // the exporter's device ordinal
  std::uint64_t size = 0;                  // the block's bytes
  std::uint64_t offset = 0;                // the block's start in the shared memory
  std::uint64_t address = 0;               // the block's address in the exporting process
  std::vector<std::uint64_t> piece_bytes;  // cuda_virtual: each physical allocation's bytes
  std::vector<int> fds;                    // cuda_virtual: one fd per piece
  unsigned char handle[64] = {};           // cuda_ipc

  shared_memory() = default;
  shared_memory(shared_memory&& other) noexcept;
  shared_memory& operator=(shared_memory&& other) noexcept;
  shared_memory(const shared_memory&) = delete;
  shared_memory& operator=(const shared_memory&) = delete;
  ~shared_memory();
  void close_fds() noexcept;
};

class memory_sharing {
 public:
  virtual ~memory_sharing() = default;
  // Describes the live block [address, address + bytes) for another process.
  // Throws invalid_argument where the memory cannot be shared (and says why).
  virtual shared_memory export_memory(address_t address, std::size_t bytes) = 0;
  // Maps a description made by another process; returns the block's address here.
  // Takes the description's file descriptors (they are closed).
  virtual address_t import_memory(shared_memory& memory) = 0;
  // Unmaps what import_memory returned.
  virtual void close_import(address_t address) = 0;
};

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

  struct state;

 private:
  std::unique_ptr<state> state_;
};

class imported_memory {
 public:
  // Connects to the exporter at `socket_path`, asks for block `id` and maps it
  // through `device` (which must implement memory_sharing). Throws
  // invalid_argument when the exporter refuses (unknown or released id), and
  // std::system_error when the socket cannot be reached.
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
