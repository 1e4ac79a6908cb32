// What a backend may offer beside memory, each found with find_capability
// (memkit/backend.hpp): peer access between devices of one kind, and memory shared
// with other processes. Backend level: no allocator, no device set.
//
//   peer_access      other devices of the same kind may reach this device's memory
//                    (CUDA: cudaDeviceEnablePeerAccess and cuMemSetAccess; sim:
//                    bookkeeping). device_set grants it (memkit/devices.hpp).
//   memory_sharing   describe a block for another process (export_memory) and map
//                    such a description here (import_memory / close_import). CUDA:
//                    virtual memory travels as one POSIX file descriptor per physical
//                    allocation under the block (cuMemExportToShareableHandle; the
//                    pages must have been created exportable), cudaMalloc segments as
//                    a legacy IPC handle of the whole segment plus the block's offset
//                    in it. sim: the block's address, checked and counted. The
//                    exporter and importer over a socket are memkit/sharing.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "memkit/backend.hpp"

namespace memkit {

class peer_access {
 public:
  virtual ~peer_access() = default;
  // Whether `accessor` (a backend of the same kind) can be granted access.
  virtual bool can_grant_access(const backend& accessor) const = 0;
  // Makes this device's memory, present and future, readable and writable from
  // `accessor`. Granting twice is harmless. Throws invalid_argument where
  // can_grant_access is false.
  virtual void grant_access(backend& accessor) = 0;
};

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

}  // namespace memkit
